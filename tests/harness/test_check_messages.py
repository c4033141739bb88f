"""How a violated expectation words a node's outcome (the checks' own tests are in
test_checks.py)."""

from __future__ import annotations

from harness.run.checks import check
from harness.run.model import NodeOutcome
from harness.scenario.load import parse


def test_an_outcome_without_an_error_class_is_worded_without_one() -> None:
    scenario = parse({"name": "s", "description": "d", "nodes": 2}, "<test>")
    killed = NodeOutcome(1, "killed", message="killed by the harness (SIGKILL)")
    failed = NodeOutcome(0, "timeout", error_class="TimeoutError", message="too slow")
    messages = [v.message for v in check(scenario, [failed, killed]) if v.check == "outcome"]
    assert messages == [
        "node 0 ended 'timeout', expected 'ok': TimeoutError: too slow",
        "node 1 ended 'killed', expected 'ok': killed by the harness (SIGKILL)",
    ]
