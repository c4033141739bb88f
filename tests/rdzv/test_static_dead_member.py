"""A member that dies before its round completes (F17): no survivor ever returns a world.

Real node processes on loopback: rank 2 is SIGKILLed at its own ``joined`` event, before
ranks 1 and 3 exist; they start 0, 0.2, 1 or 3 s after node 0 saw rank 2's connection close
(the scenario's delay, not a wait for readiness). Node 0 must not let the round complete
while rank 2's claim belongs to a closed connection; after its grace for a restart it fails
the round naming rank 2, and it keeps serving that verdict to the nodes that arrive later.

Invariants of :mod:`rdzv.rendezvous._join` covered: 10 (no round completes with a dead
member; a full round waits for its restart) and 6 (the restart takes the claim over).
"""

from __future__ import annotations

import re
import time
from functools import partial

import pytest
from static_node_proc import cluster, crashing_node, four_node_spec, reserved_port, wait_for_line


@pytest.mark.slow
@pytest.mark.parametrize("gap", [0.0, 0.2, 1.0, 3.0], ids=lambda gap: f"{gap:g}s-later")
def test_no_survivor_returns_a_world_when_rank_2_dies_at_joined_and_the_others_come_later(
    gap: float,
) -> None:
    sock = reserved_port()
    port = sock.getsockname()[1]
    spec = partial(four_node_spec, port)

    with cluster() as nodes, crashing_node(f"127.0.0.1:{port}") as crashing:
        host = nodes.start("n0", dict(spec(0, ["rdzv", "cleanup"]), listen=sock))
        sock.close()
        wait_for_line(crashing, "joined")
        crashing.kill()
        crashing.wait(timeout=60)
        nodes.pump(lambda: "member_vanished" in host.event_names() or host.done)
        time.sleep(gap)  # the scenario: the others start this much later
        nodes.start("n1", spec(1, ["rdzv", "cleanup"]))
        nodes.start("n3", spec(3, ["rdzv", "cleanup"]))
        nodes.finish("n0", "n1", "n3", timeout=40)  # far below the 60 s join timeout

    [vanished] = [e for e in host.events if e["event"] == "member_vanished"]
    assert vanished["lost_rank"] == 2
    gone = rf"rank 2 \(\S+ pid {crashing.pid}\) disappeared: its connection to the store closed"
    for name in ("n0", "n1", "n3"):
        outcome = nodes.nodes[name].step("rdzv")
        assert outcome.get("error") == "RendezvousConnectionError", (name, outcome)
        assert re.search(rf"{gone} before the round completed", outcome["message"]), outcome
    # node 0 served the verdict until the late nodes had read it: its shutdown returned
    assert nodes.nodes["n0"].step("cleanup").get("error") is None


@pytest.mark.slow
def test_a_round_full_but_for_a_dead_member_waits_for_its_restart_then_completes() -> None:
    sock = reserved_port()
    port = sock.getsockname()[1]
    spec = partial(four_node_spec, port)
    steps = ["rdzv", "shutdown"]
    # a restart from a cold process on a loaded machine may take longer than the default grace
    host_spec = dict(spec(0, steps), listen=sock, member_grace=120.0)

    with cluster() as nodes, crashing_node(f"127.0.0.1:{port}") as crashing:
        host = nodes.start("n0", host_spec)
        sock.close()
        nodes.start("n1", spec(1, steps))
        wait_for_line(crashing, "joined")
        crashing.kill()
        crashing.wait(timeout=60)
        nodes.pump(lambda: "member_vanished" in host.event_names() or host.done)
        last = nodes.start("n3", spec(3, steps))  # every rank is now confirmed, one is dead
        nodes.pump(lambda: "joined" in last.event_names() or last.done)
        assert not any(nodes.nodes[n].steps for n in ("n0", "n1", "n3")), nodes.state()
        nodes.start("n2-restarted", spec(2, steps))
        nodes.finish(timeout=60)

    for name, rank in (("n0", 0), ("n1", 1), ("n2-restarted", 2), ("n3", 3)):
        outcome = nodes.nodes[name].step("rdzv")
        assert (outcome.get("rank"), outcome.get("world_size")) == (rank, 4), (name, outcome)
