"""The oracle's ``dead_member`` rule, fed a scenario and recorded outcomes (no processes).

``fuzz_data/dead-member.toml`` is the scenario ``harness fuzz --budget 60 --seed 17`` wrote
on rdzv before the fix of issue 17 (its output: ``dead-member.fuzz.log``);
``dead-member.outcomes.json`` is what a ``harness replay`` of it recorded (events and
output left out): node 1 killed 0.98 s in, node 2 started 1.5 s in and handed a world of 3.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.fuzz import loop
from harness.fuzz.loop import fuzz, judged
from harness.fuzz.ordered import DEAD_MEMBER, dead_members
from harness.run.model import NodeOutcome, Report
from harness.scenario.faults.nodes import AbsentFault, KillFault, LateStartFault
from harness.scenario.load import load, parse
from harness.scenario.model import Scenario

DATA = Path(__file__).resolve().parent / "fuzz_data"

KILL_2_ON_JOINED = {"kind": "kill", "nodes": [2], "on": "joined", "on_node": 2, "after": 0.2}
LATE_1_3 = {"kind": "late_start", "nodes": [1, 3], "delay": 1.5}


def scenario(*faults: dict[str, Any], nodes: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "name": "ordered",
        "description": "A member killed on its own joined event.",
        "nodes": nodes,
        "timeouts": {"join": 3.0},
        "fault": list(faults),
        **extra,
    }


def returned(node: int, started: float, status: str = "ok") -> NodeOutcome:
    """A node whose rendezvous returned (it holds its rank), then ended ``status``."""
    return NodeOutcome(node, status, rank=node, world_size=4, started=started, finished=4.5)


def failed(node: int, started: float | None, status: str = "timeout") -> NodeOutcome:
    return NodeOutcome(node, status, started=started, finished=None if started is None else 4.5)


def killed(node: int, at: float) -> NodeOutcome:
    return NodeOutcome(node, "killed", started=0.0, finished=at)


def test_a_round_returning_after_its_member_died_before_the_late_nodes_started_is_flagged() -> None:
    outcomes = [
        failed(0, 0.0),
        returned(1, 1.5, "timeout"),  # returned, then the shared-store proof timed out
        killed(2, 0.22),
        returned(3, 1.5, "timeout"),
    ]
    [violation] = dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3), outcomes)
    assert violation.check == DEAD_MEMBER
    assert violation.nodes == (1, 3)
    assert "node 2 was killed at 0.22 s before node 1 started at 1.50 s" in violation.message
    assert "without rank 2's claim being alive" in violation.message


def test_success_everywhere_but_the_dead_member_is_flagged_too() -> None:
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.4), returned(3, 1.5)]
    [violation] = dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3), outcomes)
    assert violation.nodes == (0, 1, 3)


def test_every_node_failing_after_the_early_kill_is_what_the_rule_wants() -> None:
    outcomes = [failed(0, 0.0), failed(1, 1.5), killed(2, 0.2), failed(3, 1.5)]
    assert dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3), outcomes) == []


def test_a_kill_landing_after_the_late_node_started_leaves_success_legitimate() -> None:
    # the round may have completed before the kill (e.g. ``after`` longer than the delay)
    late = {"kind": "kill", "nodes": [2], "on": "joined", "on_node": 2, "after": 2.0}
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 2.3), returned(3, 1.5)]
    assert dead_members(scenario(late, LATE_1_3), outcomes) == []


def test_one_later_node_started_after_the_kill_is_enough() -> None:
    early = {"kind": "late_start", "nodes": [1], "delay": 0.1}
    later = {"kind": "late_start", "nodes": [3], "delay": 2.0}
    outcomes = [returned(0, 0.0), returned(1, 0.1), killed(2, 0.5), returned(3, 2.0)]
    [violation] = dead_members(scenario(KILL_2_ON_JOINED, early, later), outcomes)
    assert "before node 3 started at 2.00 s" in violation.message


def test_a_restart_inside_the_grace_may_take_the_claim_over_and_complete_the_round() -> None:
    restart = {**KILL_2_ON_JOINED, "kind": "restart", "duration": 0.5}
    outcomes = [returned(0, 0.0), returned(1, 1.5), returned(2, 0.7), returned(3, 1.5)]
    assert dead_members(scenario(restart, LATE_1_3), outcomes) == []


def test_a_kill_of_a_node_that_is_also_restarted_leaves_success_legitimate() -> None:
    restart = {"kind": "restart", "nodes": [2], "at": 0.5, "duration": 0.3}
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.3), returned(3, 1.5)]
    assert dead_members(scenario(KILL_2_ON_JOINED, restart, LATE_1_3), outcomes) == []


def test_a_late_node_that_is_restarted_does_not_count_as_starting_late() -> None:
    # its recorded start is its last one; an earlier incarnation may have joined in time
    restart = {"kind": "restart", "nodes": [1], "on": "joined", "on_node": 1, "duration": 2.0}
    outcomes = [returned(0, 0.0), returned(1, 2.5), killed(2, 0.4)]
    assert dead_members(scenario(KILL_2_ON_JOINED, restart, nodes=3), outcomes) == []


def test_an_absent_node_counts_as_starting_after_the_kill() -> None:
    absent = {"kind": "absent", "nodes": [3]}
    outcomes = [returned(0, 0.0), returned(1, 0.0), killed(2, 0.2), failed(3, None, "absent")]
    [violation] = dead_members(scenario(KILL_2_ON_JOINED, absent), outcomes)
    assert violation.nodes == (0, 1)
    assert "killed at 0.20 s and node 3 was never started" in violation.message


def test_a_kill_that_never_landed_because_the_node_had_ended_judges_nothing() -> None:
    outcomes = [returned(0, 0.0), returned(1, 1.5), returned(2, 0.0), returned(3, 1.5)]
    assert dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3), outcomes) == []


@pytest.mark.parametrize(
    "link_fault",
    [
        {"kind": "toxic", "nodes": [2], "type": "latency", "attributes": {"latency": 3000}},
        {"kind": "toxic", "type": "timeout", "attributes": {"timeout": 0}, "at": 0.1},
        {"kind": "link_down", "nodes": [2], "duration": 1.0, "at": 0.1},
        {"kind": "store_op", "op": "*", "action": "drop"},
    ],
)
def test_a_fault_on_the_dead_member_s_link_leaves_success_legitimate(
    link_fault: dict[str, Any],
) -> None:
    # the store host may see the close only after the late node joined
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.2), returned(3, 1.5)]
    assert dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3, link_fault), outcomes) == []


def test_a_fault_on_another_node_s_link_keeps_the_rule() -> None:
    slow = {"kind": "toxic", "nodes": [3], "type": "latency", "attributes": {"latency": 3000}}
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.2), returned(3, 1.5)]
    assert len(dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3, slow), outcomes)) == 1


def test_a_paused_store_host_turns_the_rule_off() -> None:
    pause = {"kind": "pause", "nodes": [0], "at": 0.1, "duration": 2.0}
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.2), returned(3, 1.5)]
    assert dead_members(scenario(KILL_2_ON_JOINED, LATE_1_3, pause), outcomes) == []


def test_a_misconfigured_node_turns_the_rule_off() -> None:
    override = [{"nodes": [3], "rank": 2}]
    outcomes = [returned(0, 0.0), returned(1, 1.5), killed(2, 0.2), returned(3, 1.5)]
    data = scenario(KILL_2_ON_JOINED, LATE_1_3, override=override)
    assert dead_members(data, outcomes) == []


def test_a_kill_of_several_workers_judges_each_one_that_landed() -> None:
    kill = {"kind": "kill", "nodes": [1, 2, 3], "at": 0.1}  # node 3 not started: missed
    late = {"kind": "late_start", "nodes": [3], "delay": 1.0}
    outcomes = [returned(0, 0.0), killed(1, 0.1), killed(2, 0.1), returned(3, 1.0)]
    violations = dead_members(scenario(kill, late), outcomes)
    assert "node 1 was killed at 0.10 s before node 3" in violations[0].message
    assert "node 2 was killed at 0.10 s before node 3" in violations[1].message
    assert [v.nodes for v in violations] == [(0, 3), (0, 3)]


# --- a recorded run of the bug (rdzv before the fix of issue 17) -------------------------


def recorded(name: str) -> tuple[dict[str, Any], list[NodeOutcome]]:
    with open(DATA / f"{name}.toml", "rb") as handle:
        data = tomllib.load(handle)
    rows = json.loads((DATA / f"{name}.outcomes.json").read_text(encoding="utf-8"))
    return data, [NodeOutcome(**row) for row in rows]


def test_the_recorded_dead_rank_run_is_flagged() -> None:
    data, outcomes = recorded("dead-member")
    load(DATA / "dead-member.toml")  # the shrunk file the fuzzer wrote is a valid scenario
    [violation] = dead_members(data, outcomes)
    assert violation.check == DEAD_MEMBER
    assert violation.nodes


# --- the fuzz loop applies the rule -----------------------------------------------------


def early_kill_run(scenario: Scenario, seed: int) -> Report:
    """A pretend run of rdzv before the fix: every kill lands at 0.01 s, late nodes start at
    their delay, and every node not killed or absent returns."""
    start = dict.fromkeys(range(scenario.nodes), 0.0)
    gone: set[int] = set()
    dead: set[int] = set()
    for fault in scenario.fault:
        if isinstance(fault, LateStartFault):
            start.update(dict.fromkeys(fault.nodes, fault.delay))
        elif isinstance(fault, AbsentFault):
            gone.update(fault.nodes)
        elif isinstance(fault, KillFault):
            dead.update(fault.nodes)
    outcomes = [
        failed(n, None, "absent")
        if n in gone
        else killed(n, 0.01)
        if n in dead and start[n] == 0.0
        else returned(n, start[n])
        for n in range(scenario.nodes)
    ]
    return Report(scenario, seed, outcomes=outcomes)


def test_fuzz_finds_a_dead_member_and_shrinks_it_to_one_kill_and_one_late_node(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    result = fuzz(30, 3, tmp_path, lines.append, runner=early_kill_run, max_shrinks=200)
    assert result.failures == 1
    written = load(result.written[0])
    assert "Failed checks: dead_member" in written.description
    assert written.nodes == 3
    assert sorted(f.kind for f in written.fault) == ["kill", "late_start"]
    assert lines[-1].endswith(
        "dead_member is the oracle's verdict on the run's order: replay applies it"
    )


def test_replay_judges_the_recorded_file_with_the_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, outcomes = recorded("dead-member")

    def recorded_run(scenario: Scenario, proxies: object, seed: int) -> Report:
        return Report(scenario, seed, outcomes=outcomes)

    monkeypatch.setattr(loop, "run_one", recorded_run)
    report = loop.replay(DATA / "dead-member.toml")
    assert [v.check for v in report.problems] == [DEAD_MEMBER]
    assert report.seed == 0  # the seed the file records
    # `harness run` does not apply the rule: the failure's rerun command is the replay
    assert report.replay_command.startswith("harness replay ")
    assert report.replay_command.endswith("dead-member.toml --seed 0")


def test_judged_leaves_a_skipped_run_alone() -> None:
    data = scenario(KILL_2_ON_JOINED, LATE_1_3)
    report = Report(parse(data, "<x>"), 1, outcomes=[], skipped="no torch")
    assert judged(data, report).violations == []


@pytest.mark.parametrize("status", ["ok", "timeout"])
def test_judged_adds_the_rule_s_violation_to_the_report(status: str) -> None:
    data = scenario(KILL_2_ON_JOINED, LATE_1_3)
    outcomes = [returned(0, 0.0, status), returned(1, 1.5), killed(2, 0.2), returned(3, 1.5)]
    report = judged(data, Report(parse(data, "<x>"), 1, outcomes=outcomes))
    assert [v.check for v in report.violations] == [DEAD_MEMBER]
    assert not report.passed
    assert report.replay_command.startswith("harness replay ")
