"""One test per job failure class: a torchrun job's log (written for the test, in torch's
formats: glog agent lines, ``[default0]:`` tee prefixes, workers' tracebacks) -> the job
scenario ``from-log`` writes ([job], faults on one part, the world)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from harness.logs import convert

AGENT = "I1204 10:00:0{s}.000000 {pid} torch/distributed/elastic/agent/server/api.py:680] {text}"


def job(*logs: tuple[str, str]) -> dict[str, Any]:
    return tomllib.loads(convert(list(logs), name="t").text)


def node(n: int, *worker: str, pid: int = 100) -> tuple[str, str]:
    lines = [
        AGENT.format(s=0, pid=pid + n, text="[default] Starting worker group"),
        f"rdzv_configs : {{'rank': {n}}}",
        *worker,
        AGENT.format(s=9, pid=pid + n, text="ChildFailedError: workers failed"),
    ]
    return f"node-{n}.log", "\n".join(lines) + "\n"


def test_eaddrinuse_in_a_worker_runs_a_launcher_nested_on_master_port() -> None:
    data = job(
        node(
            0,
            "[default0]:torch.distributed.DistNetworkError: The server socket has failed "
            "to listen on any local network address. port: 29500, code: -98, name: EADDRINUSE",
        ),
        node(1, "[default0]:RuntimeError: peer gone"),
    )
    assert data["job"]["script"].endswith("nested_launcher.py")


def test_gloos_full_mesh_timeout_filters_every_port_but_the_stores_in_the_netns_world() -> None:
    mesh = "[default0]:RuntimeError: Gloo connectFullMesh failed with [pair.h:311] Connect timeout"
    data = job(node(0, mesh), node(1, mesh))
    assert data["world"] == "netns"
    assert [(f["kind"], f["ports"]) for f in data["fault"]] == [("filter", ["store"])]


def test_c10d_agents_losing_the_store_advertise_a_name_that_resolves_to_loopback() -> None:
    lost = (
        "torch.distributed.DistNetworkError: The connection to the C10d store has failed. "
        "localhost:29400: [Errno 111] Connection refused"
    )
    started = AGENT.format(s=0, pid=100, text="[default] Starting worker group") + "\n"
    data = job(("node-0.log", started), ("node-1.log", started + lost + "\n"))
    assert data["job"]["local_addr"] == "localhost" and data["world"] == "netns"


def test_an_agent_without_an_endpoint_runs_without_one() -> None:
    absent = (
        "ValueError: endpoint is absent in RendezvousParameters. Try add --master-port and "
        "--master-addr to the cmd request (endpoint 'host:port')."
    )
    data = job(("node-0.log", absent + "\n"), ("node-1.log", absent + "\n"))
    assert data["job"]["endpoint"] is False
    assert {e["outcome"] for e in data["expect"]["nodes"]} == {"error"}


def _stages(n: int, *more: str) -> tuple[str, str]:
    """A job node's harness log: its rendezvous, its workers up, then ``more``."""
    stamp = "[2026-01-01 00:00:0{s},000] rdzv.rendezvous: [INFO] {text}"
    lines = [
        stamp.format(s=0, text=f"joined run_id='j' round=0 rank={n} world_size=3"),
        stamp.format(s=0, text=f"rendezvous_done rank={n} world_size=3"),
        stamp.format(s=1, text="workers_started pids=[7]"),
        stamp.format(s=2, text=f"pg_ready rank={n} world_size=3"),
        *more,
    ]
    return f"node-{n}.log", "\n".join(lines) + "\n"


_BOX = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: workers failed"
_SEND_TIMED_OUT = (
    "[2026-01-01 00:00:03,000] rdzv.rendezvous: [INFO] worker_failed: [../gloo/transport/"
    "tcp/unbound_buffer.cc:133] Timed out waiting 20000ms for send operation to complete"
)
_PEER_CLOSED = (
    "[2026-01-01 00:00:03,000] rdzv.rendezvous: [INFO] worker_failed: [../gloo/transport/"
    "tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4242"
)


def test_an_agent_whose_log_ends_after_its_workers_group_was_up_is_killed_there() -> None:
    failed = (
        "[2026-01-01 00:00:03,000] rdzv.rendezvous: [INFO] worker_failed: Connection closed by peer"
    )
    data = job(_stages(0, failed, _BOX), _stages(1, failed, _BOX), _stages(2))
    (kill,) = data["fault"]
    assert (kill["kind"], kill["nodes"], kill["on"]) == ("kill", [2], "pg_ready")
    outcomes = {n: e["outcome"] for e in data["expect"]["nodes"] for n in e["nodes"]}
    assert outcomes == {0: "error", 1: "error", 2: "killed"}
    workers = [p for p in data["expect"]["parts"] if p["part"] == "workers"]
    assert all("connection_error" in p["outcome"] for p in workers)


def test_a_survivors_workers_may_end_either_way_a_dead_peer_makes_them_fail() -> None:
    # J03 in CI: node 2 died; node 0's worker waited out its send ('Timed out', capital T:
    # a timeout, as the node classes it), node 1's saw the pair close. Which of the two a
    # survivor meets is a race, so the replay's workers may end either way.
    data = job(_stages(0, _SEND_TIMED_OUT, _BOX), _stages(1, _PEER_CLOSED, _BOX), _stages(2))
    assert [(f["kind"], f["nodes"]) for f in data["fault"]] == [("kill", [2])]
    workers = {
        n: p["outcome"]
        for p in data["expect"]["parts"]
        if p["part"] == "workers"
        for n in p["nodes"]
    }
    assert workers == {n: ["connection_error", "stopped", "timeout"] for n in (0, 1)}


def test_without_a_dead_peer_the_workers_end_as_their_errors_say() -> None:
    data = job(*(_stages(n, _SEND_TIMED_OUT, _BOX) for n in range(3)))
    assert not [f for f in data.get("fault", []) if f["kind"] == "kill"]
    workers = [p["outcome"] for p in data["expect"]["parts"] if p["part"] == "workers"]
    assert workers == [["stopped", "timeout"]] * 3


def test_survivors_restarting_after_a_node_died_replay_the_death_and_no_worker_crash() -> None:
    # J09: node 2 died; the others' workers failed for the peer gone and their agents
    # restarted the group (a restart left): the restart follows the death, not a crash
    stamp = "[2026-01-01 00:00:0{s},000] rdzv.rendezvous: [INFO] {text}"

    def events(n: int, *more: str) -> tuple[str, str]:
        lines = [
            stamp.format(s=0, text=f"rendezvous_done rank={n} world_size=3 restart=0"),
            stamp.format(s=1, text="workers_started pids=[7]"),
            stamp.format(s=2, text=f"pg_ready rank={n} world_size=3 restart=0"),
            *more,
        ]
        return f"node-{n}.log", "\n".join(lines) + "\n"

    gone = [
        stamp.format(s=3, text="worker_failed: Read error [127.0.0.1]:9100: Connection reset"),
        stamp.format(s=4, text="restart restart=1"),
    ]
    data = job(events(0, *gone), events(1, *gone), events(2))
    assert [(f["kind"], f["nodes"], f.get("part")) for f in data["fault"]] == [("kill", [2], None)]


def test_gloos_full_mesh_timeout_sets_the_group_timeout_from_how_long_the_connect_tried() -> None:
    def events(n: int) -> tuple[str, str]:
        lines = [
            f"[2026-01-01 00:00:00,002] rdzv.rendezvous: [INFO] join_start rank={n} world_size=2",
            (
                f"[2026-01-01 00:00:00,012] rdzv.rendezvous: [INFO] rendezvous_done rank={n} "
                "world_size=2"
            ),
            "[2026-01-01 00:00:00,016] rdzv.rendezvous: [INFO] workers_started pids=[6571]",
            (
                "[2026-01-01 00:00:26,016] rdzv.rendezvous: [INFO] worker_failed: Gloo "
                "connectFullMesh failed with [pair.h:311] Connect timeout [none]"
            ),
            AGENT.format(s=9, pid=100 + n, text="ChildFailedError: workers failed"),
        ]
        return f"node-{n}.log", "\n".join(lines) + "\n"

    data = job(events(0), events(1))
    assert [f["kind"] for f in data["fault"]] == ["filter"]
    assert data["job"]["process_group_timeout"] == 26.0 / 5


def restarted_node(n: int, crash: bool, collective_first: bool) -> tuple[str, str]:
    """A node's harness log: attempt 0 (node 1's worker crashes, after a collective or not),
    the group's restart, attempt 1 completing its collective."""
    stamp = "[2026-01-01 00:00:{s:02d},000] rdzv.rendezvous: [INFO] {text}"
    lines = [
        stamp.format(s=0, text=f"rendezvous_done rank={n} world_size=2 restart=0"),
        stamp.format(s=1, text="workers_started pids=[100]"),
        stamp.format(s=2, text=f"pg_ready rank={n} world_size=2 restart=0"),
    ]
    if collective_first:
        lines.append(stamp.format(s=3, text="collective_done result=3.0"))
    failure = "worker crashes on purpose" if crash else "Connection closed by peer"
    lines += [
        stamp.format(s=4, text=f"worker_failed: {failure}"),
        stamp.format(s=5, text="restart restart=1"),
        stamp.format(s=6, text=f"rendezvous_done rank={n} world_size=2 restart=1"),
        stamp.format(s=7, text="workers_started pids=[200]"),
        stamp.format(s=8, text=f"pg_ready rank={n} world_size=2 restart=1"),
        stamp.format(s=9, text="collective_done result=3.0"),
    ]
    return f"node-{n}.log", "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("collective_first", "on"), [(False, "workers_started"), (True, "pg_ready")]
)
def test_a_worker_crash_is_replayed_from_its_start_unless_a_collective_completed_before_it(
    collective_first: bool, on: str
) -> None:
    # A kill sent on pg_ready arrives late: the worker could finish its all-reduce first
    # (the restarted attempt's collective_done, after the crash, does not count).
    logs = [restarted_node(n, n == 1, collective_first) for n in range(2)]
    kills = [f for f in job(*logs)["fault"] if f["kind"] == "kill"]
    assert [(f["nodes"], f["part"], f["on"]) for f in kills] == [([1], "worker 0", on)]
