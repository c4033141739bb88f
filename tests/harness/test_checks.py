"""Checks: invariants and expectations turn outcomes into named violations."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from typing import Any

import psutil

from harness.report.text import idle_fault_lines
from harness.run.checks import check
from harness.run.model import NodeEvent, NodeOutcome, Report
from harness.run.runner import run_scenario
from harness.run.suite import embedded_proxy
from harness.scenario.faults.record import FaultRecord
from harness.scenario.load import parse
from harness.scenario.model import Scenario
from harness.world.local import LocalWorlds
from harness.world.process.leaks import leaks, listening, ours


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


def test_on_a_backend_that_ranks_the_nodes_itself_a_permutation_of_ranks_is_no_violation() -> None:
    # torch's c10d ranks the nodes by host name and PID, not by their configured ranks
    assert (
        check(scenario(backend="torch-c10d"), [ok(0, rank=2), ok(1, rank=0), ok(2, rank=1)]) == []
    )


def test_on_a_backend_that_ranks_the_nodes_itself_ranks_must_still_be_0_to_n_minus_1() -> None:
    sc = scenario(backend="torch-c10d")
    duplicate = [v.message for v in check(sc, [ok(0, rank=1), ok(1, rank=0), ok(2, rank=1)])]
    assert "rank 1 was given to 2 nodes" in duplicate
    assert "ranks are [0, 1], not 0..2" in duplicate
    beyond = check(sc, [ok(0, rank=3), ok(1, rank=0), ok(2, rank=1)])
    assert [v.message for v in beyond if v.check == "ranks"] == ["ranks are [0, 1, 3], not 0..2"]


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


def test_a_successful_node_whose_key_rank_0_never_saw_is_a_violation() -> None:
    host = ok(0)
    host.seen_ranks = [0, 2]  # rank 1 succeeded on a store rank 0 does not share
    found = [v for v in check(scenario(), [host, ok(1), ok(2)]) if v.check == "shared_store"]
    assert [v.nodes for v in found] == [(1,)]
    assert "rank 0 never saw its key" in found[0].message


def test_a_killed_node_whose_key_rank_0_never_saw_is_no_shared_store_violation() -> None:
    sc = scenario(expect={"nodes": [{"nodes": [1], "outcome": "killed"}]})
    host = ok(0)
    host.seen_ranks = [0, 2]  # rank 1 died once its rendezvous returned
    killed = NodeOutcome(1, "killed", rank=1, world_size=3)
    assert check(sc, [host, killed, ok(2)]) == []


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


def test_a_fault_expected_idle_fails_the_run_when_it_acts_and_is_no_warning_when_idle() -> None:
    sc = scenario(
        fault=[{"kind": "kill", "nodes": [1], "at": 1}, {"kind": "kill", "nodes": [2], "at": 1}],
        expect={"idle_faults": [0]},
    )
    outcomes = [ok(0), ok(1), ok(2)]
    acted = FaultRecord(0, "kill", [1], 1.0, acted={"nodes killed": 1}, expected_idle=True)
    other = FaultRecord(1, "kill", [2], 1.0, acted={"nodes killed": 1})
    found = check(sc, outcomes, faults=[acted, other])
    assert [(v.check, v.message, v.nodes) for v in found] == [
        (
            "idle",
            (
                "fault 0 (kill) acted: 1 node killed; the scenario expects it not to act "
                "(expect.idle_faults)"
            ),
            (1,),
        )
    ]
    idle = FaultRecord(0, "kill", [1], 1.0, acted={}, expected_idle=True)
    unexpected = FaultRecord(1, "kill", [2], 1.0, acted={})
    assert check(sc, outcomes, faults=[idle, unexpected]) == []
    report = Report(sc, 1, outcomes, [idle, unexpected])
    assert report.unexpectedly_idle == [unexpected]
    assert idle.effects == "did not act, as expected"
    assert idle_fault_lines(report) == ["fault 1 (kill on nodes 2) did not act"]


def test_leaks_are_reported() -> None:
    left = leaks([123], [], ["proxy x left"])
    found = check(scenario(), [ok(0), ok(1), ok(2)], leaks=left)
    assert [(v.check, v.message) for v in found] == [
        ("leaks", "node processes still running at the end: [123]"),
        ("leaks", "proxy x left"),
    ]


def test_a_port_still_listening_is_found_and_reported() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert listening([port]) == [port]
        found = check(scenario(), [ok(0), ok(1), ok(2)], leaks=leaks([], [port], []))
        held = f"{port} by the harness process itself (pid {os.getpid()})"
        assert [v.message for v in found] == [
            f"ports still listening after teardown: [{port}] ({held})"
        ]
    assert listening([port]) == []


def test_a_leaked_port_names_its_holder_by_its_role_in_the_run() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            pass_fds=[server.fileno()],
        )
        try:
            server.close()  # only the child holds the listener now
            roles = {holder.pid: "rdzv-node-0"}
            found = leaks([], [port], [], owners=ours([holder.pid]), roles=roles)
            held = f"{port} by rdzv-node-0 (pid {holder.pid})"
            assert found == [f"ports still listening after teardown: [{port}] ({held})"]
            # unnamed by the world: its process name
            name = psutil.Process(holder.pid).name()
            (line,) = leaks([], [port], [], owners=ours([holder.pid]))
            assert line.endswith(f"({port} by pid {holder.pid} ({name}))")
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()
    assert listening([port]) == []


def test_a_thread_of_the_world_still_running_after_teardown_is_a_leak() -> None:
    release = threading.Event()
    running = threading.Thread(target=release.wait, name="harness-inbox")
    ended = threading.Thread(target=lambda: None, name="harness-store-faults")
    running.start()
    ended.start()
    ended.join()
    try:
        found = check(scenario(), [ok(0), ok(1), ok(2)], leaks=leaks([], [], [], [running, ended]))
    finally:
        release.set()
        running.join()
    assert [v.message for v in found] == ["threads still running after teardown: ['harness-inbox']"]


def test_a_run_with_store_faults_and_a_squatter_leaves_no_thread_of_its_world() -> None:
    before = set(threading.enumerate())
    sc = parse(
        {
            "name": "threads",
            "description": "a squatter and a store fault: both start threads",
            "nodes": 3,
            "timeouts": {"join": 3},
            "fault": [
                {"kind": "squatter", "mode": "http", "duration": 0.5},
                {"kind": "store_op", "op": "SET", "action": "delay", "delay": 0.01},
            ],
            "expect": {"outcome": ["ok", "error", "timeout", "connection_error"]},
        },
        "<threads>",
    )
    with embedded_proxy() as client:
        report = run_scenario(sc, LocalWorlds(client), seed=1)
    assert not [v for v in report.violations if v.check == "leaks"], report.violations
    assert [f.acted for f in report.faults if f.kind == "squatter"] != [{}]
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not [
        name for name in left if name.startswith(("harness-inbox", "harness-store", "squatter"))
    ]


def returned(node: int, status: str, seen: list[int], rank: int | None = None) -> NodeOutcome:
    """A node whose rendezvous returned, then failed the shared-store proof."""
    return NodeOutcome(
        node, status, rank=node if rank is None else rank, world_size=3,
        started=0.0, finished=1.0, seen_ranks=seen,
    )  # fmt: skip


def test_a_node_may_end_in_any_outcome_of_an_expected_list() -> None:
    sc = scenario(expect={"outcome": ["ok", "timeout"]})
    joined = [NodeEvent(2, 0.5, "joined", {"rank": 2})]
    timed_out = NodeOutcome(2, "timeout", started=0.0, finished=1.0, events=joined)
    assert checks_of(sc, [ok(0), ok(1), timed_out]) == []
    refused = NodeOutcome(2, "connection_error", started=0.0, finished=1.0, events=joined)
    found = [v for v in check(sc, [ok(0), ok(1), refused]) if v.check == "outcome"]
    assert found[0].message == "node 2 ended 'connection_error', expected one of ['ok', 'timeout']"


def test_invariants_judge_what_the_rendezvous_returned_even_when_the_node_failed_later() -> None:
    # torch-like: no join events, nodes 1 and 2 returned (both as rank 1), then timed out
    sc = scenario(expect={"outcome": "timeout"})
    outcomes = [
        NodeOutcome(0, "timeout", started=0.0, finished=1.0),
        returned(1, "timeout", seen=[1]),
        returned(2, "timeout", seen=[1], rank=1),
    ]
    found = check(sc, outcomes)
    assert {v.check for v in found} == {"ranks", "complete_round"}
    (round_violation,) = [v for v in found if v.check == "complete_round"]
    assert "returned on 2 node(s) although rank(s) [0, 2] never joined" in round_violation.message


def test_ranks_whose_keys_reached_the_store_count_as_joined() -> None:
    sc = scenario(expect={"nodes": [{"nodes": [0], "outcome": "timeout"}]})
    outcomes = [NodeOutcome(0, "timeout"), ok(1), returned(2, "ok", seen=[0, 1, 2])]
    assert [v for v in check(sc, outcomes) if v.check == "complete_round"] == []


def torch_sc(**variant: Any) -> Scenario:
    return scenario(
        backend="torch-static",
        expect={"outcome": "state_error"},
        backends={"torch-static": {"note": "no rank check", **variant}},
    )


def test_a_recorded_break_of_the_backend_is_shown_as_known_and_does_not_fail() -> None:
    sc = torch_sc(violates=["ranks"], expect={"outcome": "ok"})
    found = check(sc, [ok(0), ok(1), ok(2, rank=1)])
    assert found and all(v.known for v in found if v.check == "ranks")
    assert not [v for v in found if not v.known and v.check != "complete_round"]
    assert "[known torch-static behaviour]" in found[0].message


def test_a_recorded_break_that_does_not_happen_fails_the_run() -> None:
    sc = torch_sc(violates=["ranks"], expect={"outcome": "ok"})
    found = check(sc, [ok(0), ok(1), ok(2)])
    assert [v.check for v in found] == ["known_break"]
    assert found[0].message.startswith(
        "torch-static is recorded as breaking 'ranks' here (no rank check), but this run did not"
    )
    assert not found[0].known


def test_recorded_breaks_apply_only_on_their_own_backend() -> None:
    sc = torch_sc(violates=["ranks"]).on_backend("static")
    found = check(sc, [ok(0), ok(1), ok(2, rank=1)])
    assert found and not any(v.known for v in found)


def test_a_port_the_run_gave_back_and_another_program_took_is_no_leak_of_the_run() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        # held by this process: not one of the run's (pid 1 stands for the run's own)
        assert listening([port], owners={1}) == []
        assert leaks([], [port], [], owners={1}) == []
        assert listening([port], owners=ours()) == [port]
