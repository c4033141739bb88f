"""Members that leave a completed round without confirming: node 0 is not held by them.

A member whose store connection closes, or whose process dies, after the round completed
can neither confirm that it read the result nor call ``shutdown()``. Node 0 keeps the world
(the round completed), names it, and neither its ``next_rendezvous()`` nor its
``shutdown()`` waits ``read_timeout`` for it (900 s here, torchrun's default: the tests
wait for node 0 with no bound but pytest's timeout). A member alive but silent holds node
0's ``shutdown()`` only for the quiet window. Real store server on loopback; the member that
dies is a process of its own, SIGKILLed.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from static_node_proc import python_process, wait_for_line

from conftest import InThread
from rdzv.errors import RendezvousConnectionError
from rdzv.events import EventCollector
from rdzv.rendezvous import _exit, _express
from rdzv.rendezvous._departures import Departures
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._verdict import RoundVerdict
from rdzv.rendezvous.static import StaticTCPRendezvous

READ_TIMEOUT = 900.0  # torchrun's default: the tests would hit pytest's timeout first
JOIN_TIMEOUT = 60.0

# A member in a process of its own. "ack": it dies (SIGKILL, by its own hand) when it is
# about to confirm that it read the complete verdict. "returned": it prints "returned" once
# next_rendezvous() returned, then waits to be killed; with "fork", a child it forked keeps
# its store connection open, so only the process dies (the child ends when stdin closes).
_MEMBER = """
import os, signal, sys
from rdzv.rendezvous import _express, _verdict
from rdzv.rendezvous.static import StaticTCPRendezvous

port, rank, world_size, how = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if how == "ack":  # the general join's acknowledgement, and the express's
    _verdict.RoundVerdict.acknowledge = lambda self: os.kill(os.getpid(), signal.SIGKILL)
    _express.acknowledgement = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
handler = StaticTCPRendezvous("127.0.0.1", port, rank, world_size, "run", 60)
handler.next_rendezvous()
if how == "fork":
    child = os.fork()
    if child == 0:
        os.read(0, 1)  # until the test closes stdin or kills it
        os._exit(0)
print("returned", flush=True)
os.read(0, 1)
"""


# -- the watch, fed by hand ----------------------------------------------------------------------

KEYS = RoundKeys("run")
ME = Identity("h0", 100, 0, 3, "t0", "m0")


class _Server:
    """Holds the callbacks of the one writer watch; the test calls them (keys as sent)."""

    def watch_writers(self, selects: Any, on_close: Any, on_write: Any) -> Any:
        self.on_close, self.on_write = on_close, on_write
        return lambda: None

    def write(self, key: str, value: bytes = b"1") -> None:
        self.on_write(f"/{key}".encode(), value)

    def close(self, key: str, value: bytes) -> None:
        self.on_close(f"/{key}".encode(), value)


def test_a_member_is_gone_when_its_claims_connection_closes_until_a_restart_takes_it_over() -> None:
    server, old, new = _Server(), Identity("h1", 101, 1, 3, "t1"), Identity("h1", 102, 1, 3, "t2")
    departures = Departures(server, "run", ME)  # type: ignore[arg-type]
    server.write(KEYS.claim(0, 1), old.raw)
    server.write(KEYS.of(0, "exit/2"))
    server.close(KEYS.claim(0, 1), old.raw)
    gone = departures.wait(0, "exit", [1, 2], 900.0, 900.0)
    assert (gone.done, gone.gone, gone.missing, gone.ended_by) == ([2], [1], [], None)

    server.write(KEYS.claim(0, 1), new.raw)  # a restarted process took the claim over
    there = departures.wait(0, "exit", [1, 2], 0.0, 900.0)
    assert (there.done, there.gone, there.missing, there.ended_by) == ([2], [], [1], "limit")


def test_a_wait_for_the_acks_is_woken_once_when_the_last_one_comes_not_for_each() -> None:
    server = _Server()
    departures = Departures(server, "run", ME)  # type: ignore[arg-type]
    wakes: list[int] = []
    notify = departures._changed.notify_all
    departures._changed.notify_all = lambda: (wakes.append(1), notify())[1]  # type: ignore[method-assign]
    registered = threading.Event()

    class _Waits(list[Any]):
        def append(self, item: Any) -> None:
            super().append(item)
            registered.set()

    departures._waits = _Waits()
    waiting = InThread(departures.wait, 0, "ack", [1, 2, 3], 900.0, 900.0)
    assert registered.wait(30)
    for rank in (1, 2, 3):
        server.write(KEYS.of(0, f"ack/{rank}"))
    waited = waiting.outcome()
    assert (waited.done, waited.ended_by) == ([1, 2, 3], None)
    assert wakes == [1]


def test_a_member_of_this_machine_whose_process_died_is_gone_though_its_connection_is_open() -> (
    None
):
    server, probed = _Server(), []
    dead, remote = Identity("h0", 101, 1, 3, "t1", "m0"), Identity("h9", 102, 2, 3, "t2", "m9")

    def alive(pid: int) -> bool:
        probed.append(pid)
        return pid != dead.pid

    departures = Departures(server, "run", ME, alive=alive)  # type: ignore[arg-type]
    server.write(KEYS.claim(0, 1), dead.raw)
    server.write(KEYS.claim(0, 2), remote.raw)  # alive or not: its pid means nothing here
    waited = departures.wait(0, "ack", [1, 2], 900.0, 1.0)  # a probe when nothing is heard
    assert (waited.done, waited.gone, waited.missing, waited.ended_by) == ([], [1], [2], "quiet")
    assert probed == [101]  # rank 2, of another machine, is never probed


def member(
    port: int, rank: int, world_size: int, how: str
) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    """Rank ``rank`` in a process of its own (see ``_MEMBER``); killed on the way out."""
    return python_process(_MEMBER, str(port), str(rank), str(world_size), how)


@pytest.fixture
def listen() -> Iterator[tuple[int, int]]:
    """A listening loopback socket for node 0 (which then owns it): (descriptor, port)."""
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    yield sock.detach(), port


def _node(port: int, rank: int, world_size: int, fd: int | None = None) -> StaticTCPRendezvous:
    return StaticTCPRendezvous(
        "127.0.0.1",
        port,
        rank,
        world_size,
        "run",
        JOIN_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        listen_fd=fd,
    )


def _of_node_0(events: EventCollector, name: str) -> list[dict[str, Any]]:
    return [e for e in events.events if e["event"] == name and e["rank"] == 0]


def _joined(nodes: list[StaticTCPRendezvous]) -> list[InThread]:
    return [InThread(node.next_rendezvous) for node in nodes]


def _shut_down(nodes: list[StaticTCPRendezvous]) -> list[bool]:
    """Every node's shutdown(), the others' first (node 0 waits for them)."""
    others = [InThread(node.shutdown) for node in nodes[1:]]
    return [nodes[0].shutdown(), *(other.outcome(timeout=None) for other in others)]


@pytest.mark.slow
def test_node_0_keeps_the_world_when_a_member_dies_before_confirming_it_read_the_result(
    listen: tuple[int, int], events: EventCollector
) -> None:
    fd, port = listen
    nodes = [_node(port, 0, 6, fd), *(_node(port, rank, 6) for rank in (1, 2, 4, 5))]
    try:
        joining = _joined(nodes)
        with member(port, 3, 6, "ack") as dying:
            assert dying.wait(timeout=JOIN_TIMEOUT) == -signal.SIGKILL  # at its confirmation
            worlds = [(j.outcome(timeout=None).rank, j.outcome().world_size) for j in joining]
        assert worlds == [(0, 6), (1, 6), (2, 6), (4, 6), (5, 6)]
        [unread] = _of_node_0(events, "read_wait_ended")
        assert (unread["gone"], unread["missing"]) == ([3], [])
        assert "but rank 3 left without confirming it read the result" in unread["message"]
        assert _shut_down(nodes) == [True] * 5  # rank 3 is gone: node 0 does not wait for it
    finally:
        for node in nodes:
            node.shutdown()
    [ended] = _of_node_0(events, "exit_wait_ended")
    assert (ended["gone"], ended["missing"]) == ([3], [])


def _reset_instead_of_confirming(rank: int) -> Any:
    """``RoundVerdict.acknowledge`` for the test's nodes: rank ``rank`` resets its store
    connection (``SO_LINGER`` 0) instead of confirming; its process lives on."""
    confirm = RoundVerdict.acknowledge

    def acknowledge(self: RoundVerdict) -> None:
        if self.io.me.rank != rank:
            confirm(self)
            return
        sock = self.io.store._channel.sock  # type: ignore[attr-defined]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        raise RendezvousConnectionError("connection reset (the test's doing)")

    return acknowledge


@pytest.mark.slow
def test_node_0_keeps_the_world_when_a_members_connection_resets_before_it_confirms(
    listen: tuple[int, int], events: EventCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    fd, port = listen
    monkeypatch.setattr(RoundVerdict, "acknowledge", _reset_instead_of_confirming(2))
    monkeypatch.setattr(_express, "ON", False)  # (its acknowledgement: the general join's)
    nodes = [_node(port, 0, 4, fd), *(_node(port, rank, 4) for rank in (1, 2, 3))]
    try:
        joining = _joined(nodes)
        assert joining[0].outcome(timeout=None).world_size == 4
        assert [j.outcome(timeout=None).rank for j in joining[1:] if j is not joining[2]] == [1, 3]
        with pytest.raises(RendezvousConnectionError, match="the test's doing"):
            joining[2].outcome(timeout=None)
        [unread] = _of_node_0(events, "read_wait_ended")
        assert (unread["gone"], unread["missing"]) == ([2], [])
    finally:
        for node in nodes[1:]:
            node.shutdown()
        assert nodes[0].shutdown() is True  # rank 2 never calls shutdown() on a live store


@pytest.mark.slow
@pytest.mark.parametrize("how", ["returned", "fork"])
def test_node_0s_shutdown_does_not_wait_for_a_member_killed_after_the_round_completed(
    listen: tuple[int, int], events: EventCollector, how: str
) -> None:
    fd, port = listen
    host = _node(port, 0, 2, fd)
    try:
        hosting = InThread(host.next_rendezvous)
        with member(port, 1, 2, how) as peer:
            wait_for_line(peer, "returned")
            assert hosting.outcome(timeout=None).world_size == 2
            peer.kill()
            peer.wait(timeout=60)
            leaving = InThread(host.shutdown)
            assert leaving.outcome(timeout=None) is True  # read_timeout is 900 s
    finally:
        host.shutdown()
    [waiting] = _of_node_0(events, "exit_wait")
    assert waiting["waiting_for"] == [1]
    [ended] = _of_node_0(events, "exit_wait_ended")
    assert (ended["gone"], ended["missing"]) == ([1], [])
    assert ended["message"] == (
        "rank 1 left without calling shutdown() (its connection to the store closed, or its"
        " process ended); stopping the rendezvous store"
    )


@pytest.mark.slow
def test_node_0s_shutdown_waits_for_a_silent_member_only_for_the_quiet_window(
    listen: tuple[int, int], events: EventCollector, monkeypatch: pytest.MonkeyPatch
) -> None:
    fd, port = listen
    monkeypatch.setattr(_exit, "QUIET_SECONDS", 0.2)
    nodes = [_node(port, 0, 2, fd), _node(port, 1, 2)]
    try:
        for joining in _joined(nodes):
            joining.outcome(timeout=None)
        assert nodes[0].shutdown() is False  # rank 1 is alive, connected and silent
    finally:
        nodes[1].shutdown()
        nodes[0].shutdown()
    [ended] = _of_node_0(events, "exit_wait_ended")
    assert (ended["gone"], ended["missing"]) == ([], [1])
    assert ended["message"] == (
        "rank 1 did not call shutdown(): nothing was heard from it for 0.2 s; stopping the"
        " rendezvous store anyway"
    )
