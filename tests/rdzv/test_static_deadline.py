"""Past the join deadline, one member per round names the missing ranks (invariant 11 of
:mod:`rdzv.rendezvous._join`): the store elects it, the others block for its verdict, and
if it dies they name the missing ranks themselves.

Real store servers (a subprocess each, the store hosted outside the rendezvous) and real
client connections; members are threads, or a process of their own where one must die.
Nothing here asserts how long anything took: the tests wait on processes, threads and
store state, and a member's clock runs ten times slower past its deadline, so that a busy
machine does not eat the overshoot its diagnosis is given.

Invariants of :mod:`rdzv.rendezvous._join` covered: 11 (above) and 10 (the host completes a
round whose every rank confirmed).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from round_config import round_cfg

from conftest import REPO_ROOT, ServerProcess
from rdzv.errors import RendezvousTimeoutError
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._liveness import local_machine
from rdzv.rendezvous._lost_member import LostMemberWatch
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore

KEYS = RoundKeys("run")
DONE, DIAGNOSING = KEYS.of(0, "done"), KEYS.of(0, "diagnosing")
TIMEOUT = 1.0  # every member's join timeout (one rank never comes)
SLOWER = 10.0  # past its deadline, a member's clock runs this many times slower
BOUND = 60.0  # how long the test waits for a thread or a process, at most

# A member (rank 1 of 3) that SIGKILLs its own process the moment it is elected diagnoser.
_DIES_WHEN_ELECTED = """
import logging, os, signal, sys, time
from round_config import round_cfg
from rdzv.events import EVENT_ATTR
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._liveness import local_machine
from rdzv.rendezvous._lost_member import LostMemberWatch
from rdzv.rendezvous._round_state import Identity
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore

class Die(logging.Handler):
    def emit(self, record):
        if getattr(record, EVENT_ATTR, {}).get("event") == "diagnosing":
            os.kill(os.getpid(), signal.SIGKILL)

logger = logging.getLogger("rdzv.rendezvous")
logger.addHandler(Die())
logger.setLevel(logging.DEBUG)
store = TCPStore("127.0.0.1", int(sys.argv[1]), timeout=30)
me = Identity("host", os.getpid(), 1, 3, "token1")
start = time.monotonic()
RoundProtocol(
    store, round_cfg(1, 3, float(sys.argv[2])), me, 0, start + float(sys.argv[2]),
    time.monotonic, time.time, started=start,
).join()
"""


class _SlowPastTheDeadline:
    """``time.monotonic`` until ``deadline``, then ``SLOWER`` times slower: what a member does
    past its deadline is judged, not how fast a busy machine lets it do that."""

    def __init__(self) -> None:
        self.deadline = float("inf")

    def __call__(self) -> float:
        now = time.monotonic()
        return now if now <= self.deadline else self.deadline + (now - self.deadline) / SLOWER


def _member(port: int, rank: int, world_size: int) -> RoundProtocol:
    store = TCPStore("127.0.0.1", port, timeout=30)
    clock = _SlowPastTheDeadline()
    start = clock()
    clock.deadline = start + TIMEOUT
    return RoundProtocol(
        store,
        round_cfg(rank, world_size, TIMEOUT),
        Identity("host", 1000 + rank, rank, world_size, f"token{rank}"),
        0,
        start + TIMEOUT,
        clock,
        time.time,
        started=start,
    )


def _join_all(members: list[RoundProtocol]) -> list[BaseException | None]:
    errors: list[BaseException | None] = [None] * len(members)

    def run(i: int) -> None:
        try:
            members[i].join()
        except BaseException as exc:
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(members))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
        assert not thread.is_alive(), "a member's join did not end"
    return errors


def _close(members: list[RoundProtocol]) -> None:
    for member in members:
        member.store.close()  # type: ignore[attr-defined]


def _names(events: EventCollector, name: str) -> list[dict[str, Any]]:
    return [e for e in events.events if e["event"] == name]


def test_one_member_is_elected_to_name_the_missing_rank_and_every_member_reports_it(
    server_process: ServerProcess, events: EventCollector
) -> None:
    # 8 watchmen and 3 members that wait past their deadline; rank 11 absent
    members = [_member(server_process.port, rank, 12) for rank in range(11)]
    try:
        errors = _join_all(members)
        for error in errors:
            assert isinstance(error, RendezvousTimeoutError)
            assert "11 of 12 nodes joined; missing ranks: 11." in str(error)
        assert len(_names(events, "diagnosing")) == 1  # one diagnosis, whatever the timing
        verdict = json.loads(members[0].store.get(DONE))
        assert verdict["by"]["rank"] == _names(events, "diagnosing")[0]["rank"]
        assert int(members[0].store.get(DIAGNOSING)) >= 1
    finally:
        _close(members)


def test_the_others_name_the_missing_rank_when_the_elected_diagnoser_is_killed(
    server_process: ServerProcess, events: EventCollector
) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(Path(__file__).parent)]))
    port = str(server_process.port)
    diagnoser = subprocess.Popen([sys.executable, "-c", _DIES_WHEN_ELECTED, port, "0.3"], env=env)
    try:
        assert diagnoser.wait(BOUND) == -signal.SIGKILL  # elected, then killed
    finally:
        if diagnoser.poll() is None:
            diagnoser.kill()
            diagnoser.wait(BOUND)
    members = [_member(server_process.port, 0, 3)]  # rank 2 never comes
    try:
        assert members[0].store.check([KEYS.claim(0, 1)])  # the dead diagnoser had joined
        assert int(members[0].store.get(DIAGNOSING)) == 1
        assert not members[0].store.check([DONE])  # and published nothing
        (error,) = _join_all(members)
        assert isinstance(error, RendezvousTimeoutError)
        assert "2 of 3 nodes joined; missing ranks: 2." in str(error)
        assert json.loads(members[0].store.get(DONE))["by"]["rank"] == 0  # its own verdict
        assert [e["rank"] for e in _names(events, "diagnoser_silent")] == [0]
    finally:
        _close(members)


# -- the hosting node names the missing ranks when the first member deadline passes ----------


class _Server:
    """Stands in for the StoreServer: keeps the watch's callbacks so a test can fire them."""

    def __init__(self) -> None:
        self.on_write: Any = None

    def watch_writers(self, selects: Any, on_close: Any, on_write: Any) -> Any:
        self.on_write = on_write
        return lambda: None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _host_watch(clock: _Clock) -> tuple[LostMemberWatch, Any]:
    server = _Server()
    host = Identity("h0", 100, 0, 4, "t0")
    watch = LostMemberWatch(
        server,  # type: ignore[arg-type]
        HashStore(),
        round_cfg(0, 4),
        host,
        lambda: 5.0,
        clock=clock,
    )
    return watch, server.on_write


def _wrote(on_write: Any, key: str, value: bytes) -> None:
    on_write(f"/{key}".encode(), value)


def test_the_host_learns_the_first_member_deadline_on_its_own_clock_from_the_confirmations() -> (
    None
):
    clock = _Clock()
    watch, on_write = _host_watch(clock)
    try:
        for rank, seconds_left, at in ((0, 9.0, 0.0), (1, 5.0, 0.0), (2, 3.0, 1.0)):
            who = Identity(f"h{rank}", 100 + rank, rank, 4, f"t{rank}")
            clock.now = at
            _wrote(on_write, KEYS.claim(0, rank), who.raw)
            _wrote(on_write, KEYS.confirmed(0, rank), f"{seconds_left:.3f} ".encode() + who.raw)
        _wrote(on_write, KEYS.claim(0, 3), b"rank 3 claimed, never confirmed")
        clock.now = 4.0  # rank 2's deadline: 3 s after its confirmation arrived at 1.0
        assert watch.decide(0, 4, deadline=60.0, clock=clock) == "member_deadline"
        assert watch.members(0) == ([0, 1, 2], [3], 2)
    finally:
        watch.close()


def test_the_host_completes_a_round_whose_every_rank_confirmed_whatever_the_deadlines() -> None:
    clock = _Clock()
    watch, on_write = _host_watch(clock)
    try:
        for rank in range(4):
            _wrote(on_write, KEYS.confirmed(0, rank), b"0.500 {}")
        clock.now = 30.0
        assert watch.decide(0, 4, deadline=60.0, clock=clock) == "complete"
    finally:
        watch.close()


def test_a_confirmation_without_the_seconds_left_sets_no_member_deadline() -> None:
    clock = _Clock()
    watch, on_write = _host_watch(clock)
    try:
        _wrote(on_write, KEYS.confirmed(0, 1), Identity("h1", 101, 1, 4, "t1").raw)
        clock.now = 1000.0
        assert watch.decide(0, 4, deadline=1.0, clock=clock) == "deadline"  # its own
    finally:
        watch.close()


def test_a_hosting_node_whose_own_deadline_is_far_fails_with_its_member_naming_the_rank() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    host = StaticTCPRendezvous("127.0.0.1", port, 0, 3, "run", 60, listen_fd=sock.detach())
    member = StaticTCPRendezvous("127.0.0.1", port, 1, 3, "run", 5.0)  # rank 2 absent
    outcome: list[BaseException] = []
    hosting = threading.Thread(target=_catch, args=(host, outcome), daemon=True)
    try:
        hosting.start()
        with pytest.raises(RendezvousTimeoutError, match=r"2 of 3 nodes joined; missing ranks: 2"):
            member.next_rendezvous()
        hosting.join(BOUND)  # far below the host's own 60 s timeout
        assert not hosting.is_alive()
        (error,) = outcome
        assert isinstance(error, RendezvousTimeoutError)
        assert "2 of 3 nodes joined; missing ranks: 2." in str(error)
    finally:
        member.shutdown()
        host.shutdown()


def _catch(handler: StaticTCPRendezvous, outcome: list[BaseException]) -> None:
    try:
        handler.next_rendezvous()
    except BaseException as exc:
        outcome.append(exc)


def test_a_restarted_member_replaces_its_predecessors_deadline_on_the_host() -> None:
    clock = _Clock()
    watch, on_write = _host_watch(clock)
    try:
        _wrote(on_write, KEYS.confirmed(0, 1), b"2.000 predecessor")
        _wrote(on_write, KEYS.confirmed(0, 2), b"8.000 rank 2")
        clock.now = 1.0
        _wrote(on_write, KEYS.confirmed(0, 1), b"9.000 restarted")  # the claim taken over
        assert watch.members(0)[2] == 2  # rank 2's deadline, at 8.0, comes first now
        clock.now = 8.0
        assert watch.decide(0, 4, deadline=60.0, clock=clock) == "member_deadline"
    finally:
        watch.close()


def test_the_host_takes_the_exact_deadline_of_a_member_on_its_own_machine() -> None:
    server = _Server()
    machine = local_machine()
    if not machine:
        pytest.skip("no machine tag here (/proc unavailable)")
    host = Identity(socket.gethostname(), 100, 0, 4, "t0", machine)
    watch = LostMemberWatch(server, HashStore(), round_cfg(0, 4), host, lambda: 5.0)  # type: ignore[arg-type]
    try:
        member = Identity(socket.gethostname(), 101, 1, 4, "t1", machine)
        at = time.monotonic() + 0.05  # its deadline; it claims a minute is left
        _wrote(server.on_write, KEYS.confirmed(0, 1), f"60.000 {at:.6f} ".encode() + member.raw)
        assert watch.decide(0, 4, deadline=time.monotonic() + BOUND, clock=time.monotonic) == (
            "member_deadline"
        )
        assert time.monotonic() >= at  # never before the member's own deadline
    finally:
        watch.close()
