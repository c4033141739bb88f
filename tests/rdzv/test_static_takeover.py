"""A restarted node takes over the rank claim of its dead predecessor (and nothing else does).

In process over an in-memory store (the liveness probe is injected), then the liveness probe
itself against real processes, then a real restart with node processes on loopback, and a
member that dies and is not restarted (the hosting node fails the round, naming it).

Invariants of :mod:`rdzv.rendezvous._join` covered: 6 (a takeover only of a dead claimant of
this machine), 2 (a predecessor counted before the restart is not counted twice), 5 (no
takeover in a round that already completed) and 8 (a member killed and not restarted fails
the others).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import partial

import pytest
from round_config import round_cfg
from static_node_proc import (
    Cluster,
    cluster,
    crashing_node,
    four_node_spec,
    reserved_port,
    wait_for_line,
)

from rdzv.errors import RendezvousStateError, RendezvousTimeoutError
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._liveness import process_alive
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore

KEYS = RoundKeys("run")
DEAD_PID = 2001


def _cfg(rank: int, world_size: int) -> StaticConfig:
    return round_cfg(rank, world_size)


def _identity(rank: int, world_size: int, pid: int | None = None) -> Identity:
    return Identity("host", pid or 1000 + rank, rank, world_size, f"token{rank}-{pid}", "m1")


def _dead_identity_with(**changed: str) -> Identity:
    """Rank 1 of 2 recorded by the dead ``DEAD_PID``, with ``changed`` fields."""
    return Identity(**{**_identity(1, 2, pid=DEAD_PID).as_dict(), **changed})


def _protocol(
    store: HashStore,
    me: Identity,
    deadline: float = 5.0,
    alive: Callable[[int, str], bool] = lambda pid, token: pid != DEAD_PID,
) -> RoundProtocol:
    ticks = itertools.count()
    return RoundProtocol(
        store,
        _cfg(me.rank, me.world_size),
        me,
        0,
        deadline,
        clock=lambda: next(ticks) * 0.001,
        wall=lambda: 1.0,
        alive=alive,
    )


def _joined_earlier(store: HashStore, who: Identity, *, counted: bool = True) -> None:
    """Write what ``who`` left in the store when it joined round 0 (then maybe died)."""
    store.compare_set(KEYS.of(0, "first"), "", who.raw)
    store.set(KEYS.claim(0, who.rank), who.raw)
    if counted:
        store.add(KEYS.of(0, "count"), 1)
        store.set(KEYS.confirmed(0, who.rank), who.raw)
        store.append(KEYS.of(0, "joined"), f"{who.rank},")


@pytest.mark.parametrize("counted", [True, False], ids=["predecessor-counted", "never-counted"])
def test_a_restarted_node_takes_over_its_dead_predecessors_claim_and_completes_the_round(
    counted: bool, events: EventCollector
) -> None:
    store = HashStore()
    _joined_earlier(store, _identity(0, 2))
    _joined_earlier(store, _identity(1, 2, pid=DEAD_PID), counted=counted)
    me = _identity(1, 2)

    protocol = _protocol(store, me)
    protocol.join()

    assert store.get(KEYS.claim(0, 1)) == me.raw
    assert json.loads(store.get(KEYS.of(0, "done")))["status"] == "complete"
    assert store.get(KEYS.of(0, "ack/1")) == b"1"  # the exit barrier counts the new process
    assert protocol.took_over is not None and protocol.took_over.pid == DEAD_PID
    takeover = [e for e in events.events if e["event"] == "claim_taken_over"]
    assert [(e["previous_pid"], e["previous"]) for e in takeover] == [
        (DEAD_PID, f"rank 1 (host pid {DEAD_PID})")
    ]


def test_a_predecessor_counted_before_the_restart_is_not_counted_twice_toward_completion() -> None:
    store = HashStore()
    _joined_earlier(store, _identity(0, 3))
    _joined_earlier(store, _identity(1, 3, pid=DEAD_PID))  # count 2; with the new one, 3

    with pytest.raises(
        RendezvousTimeoutError, match=r"2 of 3 nodes joined; missing ranks: 2\. Start"
    ):
        _protocol(store, _identity(1, 3), deadline=0.02).join()
    verdict = json.loads(store.get(KEYS.of(0, "done")))
    assert (verdict["status"], verdict["reason"]) == ("aborted", "timeout")


@pytest.mark.parametrize(
    ("holder", "why"),
    [
        (_identity(1, 2, pid=1500), "alive"),
        (
            Identity(**{**_identity(1, 2, pid=DEAD_PID).as_dict(), "host": "other-host"}),
            "another host",
        ),
        (
            Identity(**{**_identity(1, 2, pid=DEAD_PID).as_dict(), "machine": "m2"}),
            "another kernel, same name",
        ),
    ],
    ids=["alive", "another-host", "same-name-another-kernel"],
)
def test_a_claim_held_by_a_live_process_or_another_machine_is_a_duplicate_rank(
    holder: Identity, why: str
) -> None:
    store = HashStore()
    _joined_earlier(store, _identity(0, 2))
    _joined_earlier(store, holder)
    me = _identity(1, 2)

    both = f"claimed by {holder.host} pid {holder.pid} and by host pid {me.pid}"
    with pytest.raises(RendezvousStateError, match=rf"duplicate rank 1 .* {both}"):
        _protocol(store, me).join()
    assert store.get(KEYS.claim(0, 1)) == holder.raw, why


def test_a_restarted_node_does_not_take_over_a_claim_in_a_round_that_already_completed() -> None:
    store = HashStore()
    _joined_earlier(store, _identity(0, 2))
    _joined_earlier(store, _identity(1, 2, pid=DEAD_PID))
    verdict = {"status": "complete", "by": _identity(0, 2).as_dict(), "at": 1.0}
    store.set(KEYS.of(0, "done"), json.dumps(verdict))

    with pytest.raises(RendezvousStateError, match=r"already completed before this node"):
        _protocol(store, _identity(1, 2)).join()
    assert store.get(KEYS.claim(0, 1)) == _identity(1, 2, pid=DEAD_PID).raw


# -- the liveness probe against real processes ------------------------------------------------


def test_the_liveness_probe_sees_this_process_alive_and_a_reaped_child_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    assert process_alive(os.getpid())
    assert not process_alive(child.pid)


def test_the_liveness_probe_sees_an_exited_but_unreaped_child_as_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited; still a zombie
        os.kill(child.pid, 0)  # the kernel still knows the pid...
        assert not process_alive(child.pid)  # ...but it runs no more
    finally:
        child.wait(timeout=60)


def test_the_liveness_probe_treats_a_pid_it_may_not_signal_or_a_group_id_as_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forbidden(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    assert process_alive(0) and process_alive(-1)
    monkeypatch.setattr(os, "kill", forbidden)
    assert process_alive(os.getpid())


# -- a real restart -----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_node_restarted_after_joining_rejoins_its_round_and_every_node_completes() -> None:
    sock = reserved_port()
    port = sock.getsockname()[1]
    steps = ["rdzv", "share"]
    spec = partial(four_node_spec, port)
    # The restart must come within the hosting node's grace for a vanished member; a cold
    # process start on a loaded machine may take longer than the default, so it is raised.
    host = dict(spec(0, [*steps, "await", "shutdown"]), listen=sock, member_grace=120.0)

    with cluster() as nodes, crashing_node(f"127.0.0.1:{port}") as first:
        nodes.start("n0", host)
        sock.close()
        nodes.start("n1", spec(1, [*steps, "shutdown"]))
        wait_for_line(first, "joined")
        first.kill()  # crashes right after joining
        first.wait(timeout=60)
        restarted = nodes.start("n2-restarted", spec(2, [*steps, "shutdown"]))
        nodes.pump(lambda: "joined" in restarted.event_names() or restarted.done)
        # it joined rather than failing (node 0's own steps say why, if not)
        assert not restarted.done, (restarted.steps, nodes.nodes["n0"].steps)
        nodes.start("n3", spec(3, [*steps, "shutdown"]))
        alive = ("n1", "n2-restarted", "n3")
        nodes.pump(lambda: all(nodes.nodes[n].done for n in alive) and _waiting(nodes, "n0"))

        with TCPStore("127.0.0.1", port, timeout=30) as store:
            holder = Identity.decode(store.get(RoundKeys("run").claim(0, 2)), "claim/2")
        nodes.nodes["n0"].commands.put("go")
        nodes.finish("n0", *alive)

    assert holder.pid != first.pid
    assert holder.pid == restarted.process.pid
    for name, rank in (("n0", 0), ("n1", 1), ("n2-restarted", 2), ("n3", 3)):
        node = nodes.nodes[name]
        assert (node.step("rdzv")["rank"], node.step("rdzv")["world_size"]) == (rank, 4)
        assert node.step("share")["seen"] == ["n0", "n1", "n2-restarted", "n3"], node.steps
    assert all(s.get("error") is None for n in ("n0", *alive) for s in nodes.nodes[n].steps)


def _waiting(nodes: Cluster, name: str) -> bool:
    return any(s["step"] == "share" for s in nodes.nodes[name].steps)


@pytest.mark.slow
def test_a_member_killed_mid_round_and_not_restarted_fails_every_waiting_node_naming_it() -> None:
    sock = reserved_port()
    port = sock.getsockname()[1]
    spec = partial(four_node_spec, port)

    with cluster() as nodes, crashing_node(f"127.0.0.1:{port}") as crashing:
        nodes.start("n0", dict(spec(0, ["rdzv"]), listen=sock))
        sock.close()
        nodes.start("n1", spec(1, ["rdzv"]))
        wait_for_line(crashing, "joined")  # rank 2 joined; rank 3 never starts
        crashing.kill()
        crashing.wait(timeout=60)
        nodes.finish("n0", "n1", timeout=40)  # far below the 60 s join timeout

    gone = rf"rank 2 \(\S+ pid {crashing.pid}\) disappeared: its connection to the store closed"
    for name in ("n0", "n1"):
        failure = nodes.nodes[name].last()
        assert failure["error"] == "RendezvousConnectionError", failure
        assert re.search(rf"{gone} before the round completed .* within 2 s\.", failure["message"])
    assert re.search(r"\[reported by rank 0 \(", nodes.nodes["n1"].last()["message"])
