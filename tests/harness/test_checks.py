"""Checks: invariants and expectations turn outcomes into named violations."""

from __future__ import annotations

import socket
from typing import Any

from harness.checks import check, listening
from harness.model import NodeEvent, NodeOutcome
from harness.scenario import Scenario, parse


def scenario(**extra: Any) -> Scenario:
    return parse({"name": "s", "description": "d", "nodes": 3, **extra}, "t.toml")


def ok(node: int, rank: int | None = None, world_size: int = 3) -> NodeOutcome:
    return NodeOutcome(
        node, "ok", rank=node if rank is None else rank, world_size=world_size,
        started=0.0, finished=1.0, shared_store_ok=True,
    )  # fmt: skip


def checks_of(sc: Scenario, outcomes: list[NodeOutcome]) -> list[str]:
    return [v.check for v in check(sc, outcomes)]


def test_a_clean_run_has_no_violations() -> None:
    assert check(scenario(), [ok(0), ok(1), ok(2)]) == []


def test_duplicate_ranks_are_a_violation_naming_the_nodes() -> None:
    found = check(scenario(), [ok(0), ok(1), ok(2, rank=1)])
    ranks = [v for v in found if v.check == "ranks"]
    assert any("rank 1 was given to 2 nodes" in v.message and v.nodes == (1, 2) for v in ranks)


def test_a_rank_other_than_the_configured_one_is_a_violation() -> None:
    found = check(scenario(), [ok(0), ok(1, rank=2), ok(2, rank=1)])
    messages = [v.message for v in found if v.check == "ranks"]
    assert messages[0] == "node 1 got rank 2, expected 1"


def test_disagreeing_world_sizes_are_a_violation() -> None:
    assert "world_size" in checks_of(scenario(), [ok(0), ok(1), ok(2, world_size=4)])


def test_success_while_a_rank_never_joined_is_a_violation() -> None:
    sc = scenario(expect={"nodes": [{"nodes": [2], "outcome": "absent"}]})
    outcomes = [ok(0), ok(1), NodeOutcome(2, "absent")]
    found = [v for v in check(sc, outcomes) if v.check == "complete_round"]
    assert found and "rank(s) [2] never joined" in found[0].message


def test_a_joined_event_counts_as_joining_for_the_complete_round_check() -> None:
    sc = scenario(expect={"nodes": [{"nodes": [2], "outcome": "killed"}]})
    killed = NodeOutcome(2, "killed", events=[NodeEvent(2, 0.5, "joined", {"rank": 2})])
    assert check(sc, [ok(0), ok(1), killed]) == []


def test_a_node_that_did_not_see_the_shared_store_is_a_violation() -> None:
    bad = ok(1)
    bad.shared_store_ok = False
    assert "shared_store" in checks_of(scenario(), [ok(0), bad, ok(2)])


def test_hung_nodes_are_a_violation_unless_expected() -> None:
    hung = NodeOutcome(2, "hung", message="still running")
    assert "hung" in checks_of(scenario(), [ok(0), ok(1), hung])
    sc = scenario(expect={"nodes": [{"nodes": [2], "outcome": "hung"}]})
    assert "hung" not in checks_of(sc, [ok(0), ok(1), hung])


def test_outcome_message_and_elapsed_expectations_are_checked() -> None:
    sc = scenario(
        expect={
            "outcome": "timeout",
            "nodes": [{"nodes": "all", "outcome": "timeout", "message": "missing ranks: 2",
                       "elapsed": [2.0, 4.0]}],
        }
    )  # fmt: skip
    outcomes = [
        NodeOutcome(0, "timeout", message="missing ranks: 2", started=0.0, finished=3.0),
        NodeOutcome(1, "timeout", message="something else", started=0.0, finished=3.0),
        NodeOutcome(2, "timeout", message="missing ranks: 2", started=0.0, finished=9.0),
    ]
    found = check(sc, outcomes)
    assert [(v.check, v.nodes) for v in found] == [("message", (1,)), ("elapsed", (2,))]
    assert "took 9.00s, expected within [2.0, 4.0] s" in found[1].message


def test_a_wrong_outcome_is_reported_with_the_error() -> None:
    sc = scenario()
    failed = NodeOutcome(2, "timeout", error_class="X", message="late")
    (violation,) = [v for v in check(sc, [ok(0), ok(1), failed]) if v.check == "outcome"]
    assert violation.message == "node 2 ended 'timeout', expected 'ok': X: late"


def test_leaks_are_reported() -> None:
    found = check(scenario(), [ok(0), ok(1), ok(2)], leftover_pids=[123],
                  teardown_problems=["proxy x left"])  # fmt: skip
    assert [v.message for v in found] == [
        "node processes still running at the end: [123]",
        "proxy x left",
    ]


def test_a_port_still_listening_is_found_and_reported() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert listening([port]) == [port]
        found = check(scenario(), [ok(0), ok(1), ok(2)], ports=[port])
        assert [v.message for v in found] == [f"ports still listening after teardown: [{port}]"]
    assert listening([port]) == []
