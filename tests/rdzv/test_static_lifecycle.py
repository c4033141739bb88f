"""Closing, waiting nodes, shutdown and run isolation, with real node processes."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from static_node_proc import Cluster, cluster, reserved_port

from rdzv.store.client import TCPStore

pytestmark = pytest.mark.slow


@pytest.fixture
def nodes() -> Iterator[Cluster]:
    with cluster() as group:
        yield group


def _spec(
    port: int,
    rank: int,
    steps: list[str],
    run_id: str = "run",
    config: dict | None = None,
    listen: socket.socket | None = None,
) -> dict:
    return {
        "endpoint": f"127.0.0.1:{port}",
        "world_size": 4,
        "run_id": run_id,
        "config": {"rank": rank, "timeout": 60, **(config or {})},
        "steps": steps,
        "listen": listen,
    }


def _start(nodes: Cluster, steps: dict[str, list[str]]) -> int:
    """Start n0 (hosting, on a pre-bound socket) and the others; return the port."""
    sock = reserved_port()
    port = sock.getsockname()[1]
    for name, node_steps in steps.items():
        rank = int(name[1:])
        nodes.start(name, _spec(port, rank, node_steps, listen=sock if rank == 0 else None))
    sock.close()
    return port


def _in_round(nodes: Cluster, name: str, round_index: int) -> bool:
    return any(
        e["event"] == "joined" and e["round"] == round_index for e in nodes.nodes[name].events
    )


def _steps(nodes: Cluster, name: str, kind: str) -> list[dict]:
    return [s for s in nodes.nodes[name].steps if s["step"] == kind]


def test_invariant_4_set_closed_fails_waiting_and_later_rounds_on_every_node(
    nodes: Cluster,
) -> None:
    _start(
        nodes,
        {
            "n0": ["rdzv", "await", "is_closed"],
            "n1": ["rdzv", "rdzv"],
            "n2": ["rdzv", "await", "set_closed", "is_closed", "rdzv"],
            "n3": ["rdzv", "is_closed", "await", "is_closed", "rdzv"],
        },
    )
    nodes.pump(lambda: _in_round(nodes, "n1", 1) and len(nodes.nodes["n3"].steps) == 2)
    nodes.nodes["n2"].commands.put("go")
    nodes.finish("n1", "n2")
    nodes.nodes["n3"].commands.put("go")
    nodes.finish("n3")
    nodes.nodes["n0"].commands.put("go")
    nodes.finish("n0")

    waiting = nodes.nodes["n1"].last()
    assert waiting["error"] == "RendezvousClosedError", waiting
    assert "closed by rank 2" in waiting["message"]
    assert [s["value"] for s in _steps(nodes, "n3", "is_closed")] == [False, True]
    assert _steps(nodes, "n2", "is_closed")[0]["value"] is True
    assert _steps(nodes, "n0", "is_closed")[0]["value"] is True
    for name in ("n2", "n3"):
        assert nodes.nodes[name].last()["error"] == "RendezvousClosedError"
    assert "closed by rank 2" in nodes.nodes["n3"].last()["message"]


def test_num_nodes_waiting_counts_the_nodes_already_in_the_next_round(nodes: Cluster) -> None:
    _start(
        nodes,
        {
            "n0": ["rdzv", "await", "num_waiting", "rdzv"],
            "n1": ["rdzv", "rdzv"],
            "n2": ["rdzv", "rdzv"],
            "n3": ["rdzv", "await", "num_waiting", "rdzv"],
        },
    )
    nodes.pump(lambda: _in_round(nodes, "n1", 1) and _in_round(nodes, "n2", 1))
    nodes.nodes["n0"].commands.put("go")
    nodes.pump(lambda: _in_round(nodes, "n0", 1))  # n0 counted the waiters, then joined
    nodes.nodes["n3"].commands.put("go")
    nodes.finish()

    assert _steps(nodes, "n0", "num_waiting")[0]["value"] == 2
    assert _steps(nodes, "n3", "num_waiting")[0]["value"] == 3
    for name in nodes.nodes:
        assert [s.get("rank") for s in _steps(nodes, name, "rdzv")] == [int(name[1:])] * 2


def test_shutdown_waits_for_every_node_to_leave_then_releases_the_port(nodes: Cluster) -> None:
    port = _start(
        nodes,
        {
            "n0": ["rdzv", "share", "shutdown", "await"],
            "n1": ["rdzv", "share", "shutdown"],
            "n2": ["rdzv", "share", "shutdown"],
            "n3": ["rdzv", "share", "shutdown"],
        },
    )
    nodes.pump(lambda: bool(_steps(nodes, "n0", "shutdown")))
    try:
        with socket.socket() as probe:  # node 0 is still running: its server is gone
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # only a listener blocks
            probe.bind(("127.0.0.1", port))
    finally:
        nodes.nodes["n0"].commands.put("go")
    nodes.finish()

    for name in nodes.nodes:
        assert _steps(nodes, name, "shutdown")[0]["value"] is True


@pytest.fixture
def shared_store() -> Iterator[TCPStore]:
    with TCPStore("127.0.0.1", 0, is_master=True, timeout=60) as store:
        yield store


def test_two_runs_on_one_store_do_not_see_each_other_and_stale_rounds_are_refused(
    nodes: Cluster, shared_store: TCPStore
) -> None:
    port = shared_store.port
    external = {"start_daemon": False}
    for run in ("a", "b"):
        for rank in range(4):
            steps = (
                ["rdzv", "share", "set_closed"] if (run, rank) == ("b", 3) else ["rdzv", "share"]
            )
            nodes.start(f"{run}{rank}", _spec(port, rank, steps, run_id=run, config=external))
    nodes.finish()
    nodes.start("a2-again", _spec(port, 2, ["rdzv"], run_id="a", config=external))
    nodes.start("b1-again", _spec(port, 1, ["rdzv"], run_id="b", config=external))
    nodes.finish()

    for run in ("a", "b"):
        for rank in range(4):
            node = nodes.nodes[f"{run}{rank}"]
            assert node.step("rdzv")["rank"] == rank, node.steps
            assert node.step("share")["seen"] == [f"{run}{r}" for r in range(4)]
    stale = nodes.nodes["a2-again"].last()
    assert stale["error"] == "RendezvousStateError", stale
    assert "round 0 of run 'a'" in stale["message"] and "already completed" in stale["message"]
    closed = nodes.nodes["b1-again"].last()
    assert closed["error"] == "RendezvousClosedError", closed
    assert "run 'b'" in closed["message"] and "closed by rank 3" in closed["message"]
