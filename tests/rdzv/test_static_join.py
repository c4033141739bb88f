"""Join semantics of the static rendezvous with real node processes on loopback.

Invariants of :mod:`rdzv.rendezvous._join` covered: 1 (a duplicate rank or a world-size
mismatch fails every node at once), 2 (every node returns only after all joined), 6 (a live
duplicate is not taken over) and 11 (a missing node is named at the deadline).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator

import pytest
from static_node_proc import Cluster, cluster, reserved_port

from rdzv.rendezvous._round_state import RoundKeys
from rdzv.store.client import TCPStore

pytestmark = pytest.mark.slow


@pytest.fixture
def nodes() -> Iterator[Cluster]:
    with cluster() as group:
        yield group


def _spec(port: int, rank: int, world_size: int, steps: list[str], **config: object) -> dict:
    return {
        "endpoint": f"127.0.0.1:{port}",
        "world_size": world_size,
        "config": {"rank": rank, **config},
        "steps": steps,
    }


def _start_world(
    nodes: Cluster, world_size: int, steps: list[str], ranks: list[int] | None = None, **config
) -> int:
    """Start node 0 on a pre-bound socket and the others on its port; return the port."""
    sock = reserved_port()
    port = sock.getsockname()[1]
    for index, rank in enumerate(ranks if ranks is not None else range(world_size)):
        spec = _spec(port, rank, world_size, steps, **config)
        if index == 0:
            spec["listen"] = sock
        nodes.start(f"n{index}", spec)
    sock.close()
    return port


def test_every_node_returns_its_own_rank_and_the_world_size_only_after_all_joined(
    nodes: Cluster,
) -> None:
    world = 16
    _start_world(nodes, world, ["rdzv", "share", "shutdown"], timeout=90)
    nodes.finish()

    # A node's `joined` event is stamped after its confirmation is in the store, and node 0
    # completes the round on that write: on a busy machine the last node may be descheduled
    # between the two while the others return. Its `connected` event precedes its claim.
    last_arrival = max(
        min(e["t"] for e in n.events if e["event"] == "connected") for n in nodes.nodes.values()
    )
    for index, node in enumerate(nodes.nodes.values()):
        rdzv = node.step("rdzv")
        assert (rdzv["rank"], rdzv["world_size"]) == (index, world), node.steps
        assert rdzv["t"] >= last_arrival  # nobody returned before the last node arrived
        assert node.step("share")["seen"] == [f"n{r}" for r in range(world)]
        assert {"join_start", "connected", "joined", "complete"} <= set(node.event_names())
        (start,) = [e for e in node.events if e["event"] == "join_start"]
        # the round's join timeout, said at its start (a log reader takes it from there)
        assert (start["world_size"], start["join_timeout"]) == (world, 90)


def test_missing_node_fails_every_present_node_at_the_deadline_naming_the_missing_rank(
    nodes: Cluster,
) -> None:
    port = _start_world(nodes, 4, ["rdzv"], ranks=[0, 1, 2], timeout=3)
    nodes.finish()

    for node in nodes.nodes.values():
        failure = node.last()
        assert failure["error"] == "RendezvousTimeoutError", failure
        message = failure["message"]
        assert "3 of 4 nodes joined; missing ranks: 3." in message
        assert f"127.0.0.1:{port}" in message
        # Every node has the same timeout, so whichever deadline passes first is the one
        # named: this node's own ("after X s"), or another member's, for which node 0 named
        # the missing ranks ("when the join deadline of rank R passed (after X s here)").
        assert re.search(
            r"timed out (after \d+\.\d s|when the join deadline of rank [0-2] passed "
            r"\(after \d+\.\d s here\))",
            message,
        ), message
        assert "failed" in node.event_names()


def _joined(nodes: Cluster, *names: str) -> None:
    nodes.pump(lambda: all("joined" in nodes.nodes[n].event_names() for n in names))


def test_duplicate_rank_fails_both_claimants_fast_naming_both_processes(nodes: Cluster) -> None:
    port = _start_world(nodes, 4, ["rdzv"], ranks=[0, 1, 2], timeout=60)
    _joined(nodes, "n0", "n1", "n2")
    nodes.start("dup", _spec(port, 1, 4, ["rdzv"], timeout=60))
    nodes.finish(timeout=40)  # far below the 60 s join timeout: nobody waits for the deadline

    pids = {nodes.nodes[name].process.pid for name in ("n1", "dup")}
    for node in nodes.nodes.values():
        failure = node.last()
        assert failure["error"] == "RendezvousStateError", failure
        assert "duplicate rank 1" in failure["message"]
        for pid in pids:
            assert f"pid {pid}" in failure["message"]


def test_world_size_mismatch_fails_every_node_fast_naming_both_sizes(nodes: Cluster) -> None:
    port = _start_world(nodes, 4, ["rdzv"], ranks=[0, 2], timeout=60)
    _joined(nodes, "n0", "n1")
    nodes.start("big", _spec(port, 1, 5, ["rdzv"], timeout=60))
    nodes.finish(timeout=40)

    for node in nodes.nodes.values():
        failure = node.last()
        assert failure["error"] == "RendezvousStateError", failure
        assert re.search(r"expects 5 nodes but rank [02] .* expecting 4", failure["message"])


def test_nodes_started_before_node_0_binds_retry_and_succeed(nodes: Cluster) -> None:
    sock = reserved_port()  # bound, not listening: early dials are refused
    port = sock.getsockname()[1]
    for rank in range(1, 6):
        nodes.start(f"n{rank}", _spec(port, rank, 6, ["rdzv"], timeout=60))

    def refused_everywhere() -> bool:
        return all(
            any(e["event"] == "connect_attempt" and e["error"] for e in nodes.nodes[n].events)
            for n in nodes.nodes
        )

    nodes.pump(refused_everywhere)
    nodes.start("n0", dict(_spec(port, 0, 6, ["rdzv"], timeout=60), listen=sock))
    sock.close()
    nodes.finish()

    for name, node in nodes.nodes.items():
        assert node.step("rdzv")["rank"] == int(name[1:]), node.steps


def test_store_host_death_mid_round_gives_the_others_a_prompt_connection_error(
    nodes: Cluster,
) -> None:
    port = _start_world(nodes, 4, ["rdzv"], ranks=[0, 1, 2], timeout=90)
    keys = RoundKeys("run")
    with TCPStore("127.0.0.1", port, timeout=60, connect_timeout=60) as probe:
        probe.wait([keys.claim(0, rank) for rank in range(3)])
    os.kill(nodes.nodes["n0"].process.pid, signal.SIGKILL)
    nodes.finish("n1", "n2", timeout=45)  # half the join timeout: no waiting for the deadline

    for name in ("n1", "n2"):
        failure = nodes.nodes[name].last()
        assert failure["error"] == "RendezvousConnectionError", failure
        assert f"127.0.0.1:{port}" in failure["message"]


def test_exit_barrier_keeps_the_store_alive_until_a_paused_node_has_read_the_result(
    nodes: Cluster,
) -> None:
    """Node 0 ends its process right after next_rendezvous; node 1 is frozen meanwhile."""
    sock = reserved_port()
    port = sock.getsockname()[1]
    nodes.start("n0", dict(_spec(port, 0, 3, ["rdzv", "exit"], timeout=90), listen=sock))
    sock.close()
    nodes.start("n1", _spec(port, 1, 3, ["rdzv"], timeout=90))
    keys = RoundKeys("run")
    with TCPStore("127.0.0.1", port, timeout=60, connect_timeout=60) as probe:
        probe.wait([keys.confirmed(0, 1)])  # n1 now only waits for the verdict
        os.kill(nodes.nodes["n1"].process.pid, signal.SIGSTOP)
        try:
            nodes.start("n2", _spec(port, 2, 3, ["rdzv"], timeout=90))
            probe.wait([keys.of(0, "done")])
            # n2 returned and n0 read the result: without the barrier n0 would be gone now.
            nodes.pump(
                lambda: (
                    bool(nodes.nodes["n2"].steps) and "complete" in nodes.nodes["n0"].event_names()
                )
            )
        finally:
            resumed_at = time.time()
            os.kill(nodes.nodes["n1"].process.pid, signal.SIGCONT)
    nodes.finish("n1", "n2")
    nodes.pump(lambda: bool(nodes.nodes["n0"].steps))  # n0 reports, then ends without "done"
    nodes.nodes["n0"].process.join(60)

    for name, rank in (("n1", 1), ("n2", 2)):
        assert nodes.nodes[name].step("rdzv").get("rank") == rank, nodes.nodes[name].steps
    assert nodes.nodes["n0"].step("rdzv")["t"] >= resumed_at  # n0 waited for frozen n1
    assert nodes.nodes["n0"].process.exitcode == 0
