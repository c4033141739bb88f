"""Packed nodes: node 0 a process, the others K per process as threads (harness.world.packed).

Each run goes through the suite's run_one, as ``harness run`` does: the report's checks
include the leak checks (node processes, ports, threads, proxies), so a passing report also
says nothing was left behind. Kill, pause and restart of a packed node are emulations; these
tests check they have the effect a real process fault has on the others.
"""

from __future__ import annotations

import socket
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import harness

from harness.errors import ScenarioError
from harness.run.model import Report
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import load, parse
from harness.world.packed import placement
from harness.world.process.dns import DnsShim, install_dns_shim

ROOT = Path(__file__).resolve().parents[2]


def _run(data: dict[str, Any], seed: int = 1) -> Report:
    scenario = parse({"description": "packed", **data}, "<packed>")
    return run_one(scenario, embedded_proxy, seed)


def _problems(report: Report) -> str:
    lines = [report.error or "", *(v.message for v in report.violations)]
    lines += [f"node {o.node}: {o.status} {o.message}" for o in report.outcomes if o.message]
    return "\n".join(lines)


@pytest.mark.slow
def test_a_packed_run_of_a_few_dozen_nodes_passes_and_says_where_each_node_ran() -> None:
    report = _run({"name": "packed-26", "nodes": 26, "pack": 8, "timeouts": {"join": 60}})

    assert report.passed, _problems(report)
    assert sorted(o.rank for o in report.outcomes if o.rank is not None) == list(range(26))
    assert report.outcomes[0].placement == "process"
    assert {o.placement for o in report.outcomes[1:]} == {placement(8)}
    by_pid: dict[int | None, list[int]] = defaultdict(list)
    for outcome in report.outcomes:
        by_pid[outcome.pid].append(outcome.node)
    # node 0 alone; then nodes 1-8, 9-16, 17-24 and 25, each set in one process
    assert sorted(by_pid.values()) == [
        [0],
        list(range(1, 9)),
        list(range(9, 17)),
        list(range(17, 25)),
        [25],
    ]


@pytest.mark.slow
def test_a_killed_packed_node_is_named_by_the_others_and_never_acts_again() -> None:
    report = _run(
        {
            "name": "packed-kill",
            "nodes": 6,
            "pack": 3,
            "timeouts": {"join": 60},
            "fault": [
                # the round cannot complete before node 5 arrives, long after the kill
                {"kind": "late_start", "nodes": [5], "delay": 8.0},
                # node 4 claims its rank after node 0 started (node 0 follows the writer of
                # every claim from its server's first request, so this is not needed for
                # the watch any more; it keeps the kill after node 0 is up)
                {"kind": "late_start", "nodes": [4], "delay": 1.5},
                {"kind": "kill", "nodes": [4], "on": "joined", "on_node": 4, "after": 0.2},
            ],
            "expect": {
                "outcome": "connection_error",
                "nodes": [
                    {
                        # node 5 arrives after the verdict: node 0 still serves it
                        "nodes": [0, 1, 2, 3, 5],
                        "outcome": "connection_error",
                        "message": r"rank 4 \(.*\) disappeared",
                    },
                    {"nodes": [4], "outcome": "killed"},
                ],
            },
        }
    )

    assert report.passed, _problems(report)
    assert [f.acted for f in report.faults if f.kind == "kill"] == [{"nodes killed": 1}]
    killed = report.outcomes[4]
    names = [e.event for e in killed.events]
    assert "joined" in names
    # reset under it, a live thread would have reported its failure and shut down
    assert not {"failed", "failure_published", "failure_not_published", "shutdown"} & set(names)


@pytest.mark.slow
@pytest.mark.parametrize("gap", [0.0, 0.2, 1.0, 3.0], ids=lambda gap: f"{gap:g}s-later")
def test_no_packed_survivor_returns_a_world_when_rank_2_dies_at_joined_before_the_others(
    gap: float,
) -> None:
    late = 2.0 + gap  # node 2 joins well before 2 s; nodes 1 and 3 come after its kill
    report = _run(
        {
            "name": "packed-dead-member",
            "nodes": 4,
            "pack": 2,  # nodes 1 and 2 share a process: the kill is emulated in it
            "timeouts": {"join": 30},
            "fault": [
                {"kind": "late_start", "nodes": [1, 3], "delay": late},
                {"kind": "kill", "nodes": [2], "on": "joined", "on_node": 2},
            ],
            "expect": {
                "outcome": "connection_error",
                "nodes": [
                    {
                        "nodes": [0, 1, 3],
                        "outcome": "connection_error",
                        "message": r"rank 2 \(.*\) disappeared: its connection to the store closed",
                    },
                    {"nodes": [2], "outcome": "killed"},
                ],
            },
        },
        seed=17,
    )

    assert report.passed, _problems(report)
    [joined] = [e.t for e in report.outcomes[2].events if e.event == "joined"]
    assert all(report.outcomes[n].started > joined for n in (1, 3)), "not the scenario"  # type: ignore[operator]
    assert not any(o.status == "ok" for o in report.outcomes)


@pytest.mark.slow
def test_a_restarted_packed_node_takes_its_own_claim_over_in_the_same_process() -> None:
    scenario = load(ROOT / "scenarios" / "restart-after-join.toml").packed(2)

    report = run_one(scenario, embedded_proxy, 3701)

    assert report.passed, _problems(report)
    node = report.outcomes[2]
    takeovers = [e for e in node.events if e.event == "claim_taken_over"]
    assert len(takeovers) == 1, [e.event for e in node.events]
    # the predecessor was a thread of this very process: same pid, dead all the same
    assert takeovers[0].fields["previous_pid"] == node.pid == report.outcomes[1].pid
    assert node.placement == placement(2)
    assert report.replay_command.endswith("restart-after-join.toml --seed 3701 --pack 2")


@pytest.mark.slow
def test_a_packed_node_paused_mid_run_holds_its_link_so_the_others_miss_it() -> None:
    report = _run(
        {
            "name": "packed-pause",
            "nodes": 4,
            "pack": 3,
            "timeouts": {"join": 4},
            "fault": [
                # nobody can join before node 0 serves: by then node 3 is surely paused
                {"kind": "late_start", "nodes": [0], "delay": 2.0},
                {
                    "kind": "pause",
                    "nodes": [3],
                    "on": "started",
                    "on_node": 3,
                    "after": 0.01,  # not launched paused: its link is held
                    "duration": 8,
                },
            ],
            "expect": {
                "outcome": "timeout",
                "nodes": [
                    {"nodes": [0, 1, 2], "outcome": "timeout", "message": "missing ranks: 3"},
                    {"nodes": [3], "outcome": ["timeout", "connection_error"]},
                ],
            },
        }
    )

    assert report.passed, _problems(report)
    assert [f.acted for f in report.faults if f.kind == "pause"] == [{"nodes paused": 1}]


@pytest.mark.slow
def test_a_packed_node_launched_paused_waits_in_its_thread_until_resumed() -> None:
    scenario = load(ROOT / "scenarios" / "paused-node.toml").packed(3)

    report = run_one(scenario, embedded_proxy, 3401)

    assert report.passed, _problems(report)
    paused = report.outcomes[3]
    started = [e.t for e in paused.events if e.event == "started"]
    joined = [e.t for e in paused.events if e.event == "join_start"]
    assert started and joined and joined[0] - started[0] >= 4.0  # held until the heal (5 s)


def test_pack_must_be_at_least_two_nodes_per_process() -> None:
    with pytest.raises(ScenarioError) as caught:
        parse({"name": "p", "description": "d", "nodes": 4, "pack": 1}, "<p>")
    assert list(caught.value.problems) == ["pack: got 1; must be at least 2"]
    scenario = parse({"name": "p", "description": "d", "nodes": 4}, "<p>")
    assert scenario.pack is None and scenario.packed(5).pack == 5
    with pytest.raises(ScenarioError, match="pack: must be at least 2"):
        scenario.packed(1)


def test_harness_run_pack_rejects_fewer_than_two_nodes_per_process() -> None:
    result = harness("run", "scenarios/happy-path.toml", "--pack", "1", cwd=ROOT)
    assert result.returncode == 2
    assert "--pack takes a whole number of nodes per process of at least 2, got '1'" in (
        result.stderr
    )


def test_one_dns_shim_counts_each_failed_lookup_for_the_node_that_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Down:
        def is_set(self) -> bool:
            return False

    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)  # restored afterwards
    failures = [0, 0, 0]
    caller: list[int | None] = [2]
    install_dns_shim(DnsShim("store.test", "127.0.0.1", Down(), failures, 0), lambda: caller[0])
    for who in (2, 2, 1, None):
        caller[0] = who
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("store.test", 80)
    assert failures == [1, 1, 2]  # None: the shim's own slot
