"""What every node said and did, for passing runs too (``harness run -v``, the pytest
plugin's ``harness nodes`` section): built from reports directly, no processes."""

from __future__ import annotations

from report_samples import happy_report, scale_report

from harness.report.details import EVENTS_SHOWN, detail_lines, event_lines
from harness.run.model import NodeEvent, NodeOutcome


def test_a_passing_run_lists_each_nodes_outcome_and_events() -> None:
    lines = detail_lines(happy_report(nodes=3))
    assert "node 1: ok, rank 1, world size 3, after 0.216 s" in lines
    assert "node 2 events:" in lines
    assert "  0.062 s joined" in lines[lines.index("node 1 events:") :]


def test_a_run_of_the_same_event_is_one_line_with_the_last_ones_message() -> None:
    refused = "StoreClosedError: connection reset by peer"
    events = [NodeEvent(1, 0.1 * i, "connect_attempt", {"error": refused}) for i in (1, 2, 3)]
    events.append(NodeEvent(1, 0.5, "connected", {"attempts": 4}))
    events.append(NodeEvent(1, 0.6, "exit_wait", {"message": "waiting up to 5 s"}))
    outcome = NodeOutcome(node=1, status="ok", events=events)
    assert event_lines(outcome) == [
        "node 1 events:",
        f"  0.100-0.300 s connect_attempt x3: {refused}",
        "  0.500 s connected",
        "  0.600 s exit_wait: waiting up to 5 s",
    ]


def test_a_large_run_folds_its_outcomes_and_lists_the_events_of_the_first_nodes() -> None:
    lines = detail_lines(scale_report(nodes=4096, expect_ok_everywhere=True))
    assert sum(line.endswith(" events:") for line in lines) == EVENTS_SHOWN
    assert f"events of {4096 - EVENTS_SHOWN} more node(s) not shown" in "\n".join(lines)
    assert len(lines) < 400
