"""A member that vanishes mid-round: the server's generic writer watch, the hosting node's
check after the grace, and a whole round on loopback in process (real store server).

Invariants of :mod:`rdzv.rendezvous._join` covered: 8 (the host aborts the round naming a
member whose connection closed, unless it was taken over) and 10 (the host decides complete
only while no claim belongs to a closed connection; a filler leaves completion to it).
"""

from __future__ import annotations

import json
import queue
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from round_config import round_cfg

from conftest import InThread
from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousTimeoutError,
    StoreConnectionError,
    StoreTimeoutError,
)
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._lost_member import LostMemberWatch
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer
from rdzv.store.state._writers import OnClose, OnWrite, Selects, WatchingKV
from rdzv.store.wire import _wire as w

KEYS = RoundKeys("run")

# -- the generic writer watch of the store server ---------------------------------------------


class _Watched:
    """A WatchingKV with one watch on keys under ``c/``; closes are recorded."""

    def __init__(self, *conns: str) -> None:
        self.kv = WatchingKV()
        self.closed: list[tuple[bytes, bytes | None]] = []
        self.cancel = self.kv.watch_writers(
            lambda key: key.startswith(b"c/"), lambda key, value: self.closed.append((key, value))
        )
        for conn in conns:
            self.kv.open(conn)
            self.kv.feed(conn, [w.Validate()], 0.0)

    def send(self, conn: str, *requests: Any) -> None:
        self.kv.feed(conn, list(requests), 0.0)

    def close(self, conn: str, notify: bool = True) -> None:
        self.kv.close(conn)
        self.kv.writer_closed(conn, notify)


def test_the_connection_that_changed_a_watched_key_is_reported_when_it_closes_and_no_other() -> (
    None
):
    kv = _Watched("a", "b")
    kv.send("a", w.CompareSet(b"c/1", b"", b"A"))
    kv.send("b", w.CompareSet(b"c/1", b"", b"B"), w.Set(b"other", b"x"))  # did not swap c/1

    kv.close("b")
    assert kv.closed == []
    kv.close("a")
    assert kv.closed == [(b"c/1", b"A")]


def test_a_later_writer_takes_a_watched_key_over_from_an_earlier_one() -> None:
    kv = _Watched("a", "b")
    kv.send("a", w.CompareSet(b"c/1", b"", b"A"))
    kv.send("b", w.CompareSet(b"c/1", b"A", b"B"))

    kv.close("a")
    assert kv.closed == []
    kv.close("b")
    assert kv.closed == [(b"c/1", b"B")]


def test_a_write_pipelined_behind_a_wait_belongs_to_the_connection_that_sent_it() -> None:
    kv = _Watched("a", "b")
    kv.send("a", w.Wait((b"k",)), w.Set(b"c/2", b"A"))  # held until k exists
    kv.send("b", w.Set(b"k", b"1"))  # wakes a: a's SET runs now, during b's request

    kv.close("b")
    assert kv.closed == []
    kv.close("a")
    assert kv.closed == [(b"c/2", b"A")]


def test_a_watch_added_later_follows_the_writers_recorded_since_the_first_request() -> None:
    kv = WatchingKV()
    for conn in ("a", "b"):
        kv.open(conn)
        kv.feed(conn, [w.Validate()], 0.0)
    kv.feed("a", [w.CompareSet(b"c/1", b"", b"A")], 0.0)
    kv.feed("b", [w.CompareSet(b"c/2", b"", b"B"), w.CompareSet(b"c/1", b"", b"B")], 0.0)
    kv.close("b")
    kv.writer_closed("b")  # b wrote c/2 and left before anyone watched
    closed: list[tuple[bytes, bytes | None]] = []
    written: list[tuple[bytes, bytes | None]] = []

    kv.watch_writers(
        lambda key: key.startswith(b"c/"),
        lambda key, value: closed.append((key, value)),
        lambda key, value: written.append((key, value)),
    )
    assert written == [(b"c/1", b"A"), (b"c/2", b"B")]  # what exists, as it is
    assert closed == [(b"c/2", b"B")]  # its writer is already gone
    kv.close("a")
    kv.writer_closed("a")
    assert closed == [(b"c/2", b"B"), (b"c/1", b"A")]


def test_a_watch_hears_of_every_change_of_a_selected_key_and_of_no_other() -> None:
    kv = _Watched("a")
    written: list[tuple[bytes, bytes | None]] = []
    kv.kv.watch_writers(lambda key: key == b"c/1", lambda *_: None, lambda *x: written.append(x))

    kv.send("a", w.Set(b"c/1", b"A"), w.Set(b"c/1", b"A"), w.Set(b"c/2", b"B"))
    kv.send("a", w.Add(b"c/1x", 1), w.DeleteKey(b"c/1"))
    assert written == [(b"c/1", b"A"), (b"c/1", None)]


def test_a_store_server_watch_added_after_a_client_wrote_reports_that_clients_close() -> None:
    closed: queue.Queue[tuple[bytes, bytes | None]] = queue.Queue()
    with StoreServer("127.0.0.1", 0) as server:
        client = TCPStore("127.0.0.1", server.port, timeout=30)
        client.compare_set("c/1", "", "A")
        client.get("c/1")  # answered: the server applied the compare_set
        server.watch_writers(lambda key: key == b"/c/1", lambda *x: closed.put(x))
        client.close()
        assert closed.get(timeout=30) == (b"/c/1", b"A")


def test_a_cancelled_watch_and_a_closing_server_report_nothing() -> None:
    kv = _Watched("a", "b")
    kv.send("a", w.Set(b"c/1", b"A"))
    kv.send("b", w.Set(b"c/2", b"B"))

    kv.close("a", notify=False)  # the server is shutting down
    kv.cancel()
    kv.close("b")
    assert kv.closed == []


# -- the hosting node's check after the grace ------------------------------------------------


def _cfg(rank: int, world_size: int) -> StaticConfig:
    return round_cfg(rank, world_size, timeout=60)


class _Server:
    """Stands in for the StoreServer: keeps the watch so a test can fire it."""

    def __init__(self) -> None:
        self.watches: list[tuple[Selects, OnClose]] = []
        self.on_write: OnWrite | None = None

    def watch_writers(self, selects: Selects, on_close: OnClose, on_write: OnWrite) -> Any:
        self.watches.append((selects, on_close))
        self.on_write = on_write
        return lambda: None


def _claimed(store: HashStore, who: Identity) -> bytes:
    store.compare_set(KEYS.of(0, "first"), "", who.raw)
    store.set(KEYS.claim(0, who.rank), who.raw)
    return f"/{KEYS.claim(0, who.rank)}".encode()


def test_the_host_aborts_the_round_naming_a_member_whose_connection_closed() -> None:
    store, server, host = HashStore(), _Server(), Identity("h0", 100, 0, 3, "t0")
    gone = Identity("h1", 101, 1, 3, "t1")
    key = _claimed(store, gone)
    watch = LostMemberWatch(server, store, _cfg(0, 3), host, lambda: 5.0, grace=0.0)  # type: ignore[arg-type]
    try:
        [(selects, on_close)] = server.watches
        assert selects(key) and not selects(f"/{KEYS.of(0, 'count')}".encode())
        on_close(key, gone.raw)
        store.wait([KEYS.of(0, "done")], timedelta(seconds=30))
    finally:
        watch.close()

    verdict = json.loads(store.get(KEYS.of(0, "done")))
    assert (verdict["status"], verdict["reason"], verdict["lost"]) == (
        "aborted",
        "member_lost",
        gone.as_dict(),
    )
    assert verdict["message"] == (
        "rendezvous round 0 of run 'run' at 127.0.0.1:29400 failed: rank 1 (h1 pid 101)"
        " disappeared: its connection to the store closed before the round completed (it may"
        " have died or lost its network), and no restarted rank 1 took its place within 0 s."
        " The round cannot complete without that node; check its log, then restart the round."
    )


def test_the_host_leaves_a_round_alone_once_a_restarted_member_took_the_claim_over() -> None:
    store, server, host = HashStore(), _Server(), Identity("h0", 100, 0, 3, "t0")
    gone = Identity("h1", 101, 1, 3, "t1")
    _claimed(store, gone)
    store.set(KEYS.claim(0, 1), Identity("h1", 102, 1, 3, "t2").raw)  # the restart took it
    watch = LostMemberWatch(server, store, _cfg(0, 3), host, lambda: 5.0, grace=0.0)  # type: ignore[arg-type]
    try:
        watch._check(0, 1, gone.raw)  # what the timer runs after the grace
    finally:
        watch.close()
    assert not store.check([KEYS.of(0, "done")])


def _key(name: str) -> bytes:
    return f"/{name}".encode()


def _round_of_three(server: _Server) -> tuple[LostMemberWatch, Identity, OnClose, OnWrite]:
    """A host watch (rank 0 of 3, grace far away) whose members 1 and 2 claimed and
    confirmed; returns the watch, rank 1's identity and the server's callbacks."""
    host = Identity("h0", 100, 0, 3, "t0")
    watch = LostMemberWatch(server, HashStore(), _cfg(0, 3), host, lambda: 5.0, grace=600.0)  # type: ignore[arg-type]
    [(_, on_close)] = server.watches
    on_write = server.on_write
    assert on_write is not None
    one = Identity("h1", 101, 1, 3, "t1")
    for who in (host, one, Identity("h2", 102, 2, 3, "t2")):
        on_write(_key(KEYS.claim(0, who.rank)), who.raw)
        on_write(_key(KEYS.confirmed(0, who.rank)), who.raw)
    return watch, one, on_close, on_write


def test_the_hosts_decision_is_woken_only_by_the_writes_that_can_change_it() -> None:
    # At 256 nodes every claim and confirmation used to wake the hosting node's joining
    # thread (a switch and a look at the round each); only the first member deadline and
    # the last confirmation can change what it decides or how long it waits.
    server = _Server()
    host = Identity("h0", 100, 0, 3, "t0")
    watch = LostMemberWatch(server, HashStore(), _cfg(0, 3), host, lambda: 5.0, grace=600.0)  # type: ignore[arg-type]
    wakes: list[int] = []
    notify = watch._changed.notify_all
    watch._changed.notify_all = lambda: (wakes.append(1), notify())[1]  # type: ignore[method-assign]
    on_write = server.on_write
    assert on_write is not None
    try:
        members = [host, Identity("h1", 101, 1, 3, "t1"), Identity("h2", 102, 2, 3, "t2")]
        for who in members:
            on_write(_key(KEYS.claim(0, who.rank)), who.raw)
        assert wakes == []
        for who in members:  # each with 30 s left: the first deadline is the first one's
            on_write(_key(KEYS.confirmed(0, who.rank)), b"30.000 " + who.raw)
        assert len(wakes) == 2  # the first member deadline, then the last confirmation
        assert watch.decide(0, 3, time.monotonic() + 30, time.monotonic) == "complete"
    finally:
        watch.close()


def test_the_host_decides_complete_only_while_no_claim_belongs_to_a_closed_connection() -> None:
    server = _Server()
    watch, one, on_close, on_write = _round_of_three(server)
    try:
        on_close(_key(KEYS.claim(0, 1)), one.raw)  # rank 1's connection closed
        assert watch.decide(0, 3, deadline=1.0, clock=lambda: 1.0) == "deadline"
        restarted = Identity("h1", 103, 1, 3, "t3")
        on_write(_key(KEYS.claim(0, 1)), restarted.raw)  # a restart took the claim over
        assert watch.decide(0, 3, deadline=1.0, clock=lambda: 1.0) == "complete"
    finally:
        watch.close()


def test_closing_the_watch_ends_the_hosts_wait_for_completion() -> None:
    server = _Server()
    watch, _, _, _ = _round_of_three(server)
    deciding = InThread(watch.decide, 0, 4, time.monotonic() + 60, time.monotonic)
    watch.close()
    assert deciding.outcome(timeout=30) == "closed"


def test_a_member_lost_after_the_host_decided_complete_is_left_to_the_exit_barrier(
    events: EventCollector,
) -> None:
    server = _Server()
    watch, one, on_close, _ = _round_of_three(server)
    try:
        assert watch.decide(0, 3, deadline=1.0, clock=lambda: 1.0) == "complete"
        on_close(_key(KEYS.claim(0, 1)), one.raw)
    finally:
        watch.close()
    assert "member_vanished" not in [e["event"] for e in events.events]


def test_the_hosts_wait_for_completion_ends_with_the_last_confirmation_or_a_verdict() -> None:
    server = _Server()
    watch, _, _, on_write = _round_of_three(server)
    try:
        four = Identity("h3", 104, 3, 4, "t4")
        deciding = InThread(watch.decide, 0, 4, time.monotonic() + 60, time.monotonic)
        on_write(_key(KEYS.confirmed(0, 3)), four.raw)
        assert deciding.outcome(timeout=30) == "complete"
        verdict = InThread(watch.decide, 1, 4, time.monotonic() + 60, time.monotonic)
        on_write(_key(KEYS.of(1, "done")), b'{"status": "aborted"}')
        assert verdict.outcome(timeout=30) == "verdict"
    finally:
        watch.close()


# -- a whole round on loopback, in process --------------------------------------------------


@pytest.fixture
def listen_fd() -> Iterator[tuple[int, int]]:
    """A listening loopback socket handed to the hosting node (which then owns it)."""
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    fd = sock.detach()
    yield fd, port


def test_every_waiting_node_fails_at_once_when_a_member_vanishes_mid_round(
    listen_fd: tuple[int, int],
) -> None:
    fd, port = listen_fd
    host = StaticTCPRendezvous("127.0.0.1", port, 0, 4, "run", 60, listen_fd=fd)
    member = StaticTCPRendezvous("127.0.0.1", port, 2, 4, "run", 60)
    late = StaticTCPRendezvous("127.0.0.1", port, 3, 4, "run", 60)
    try:
        hosting = InThread(host.next_rendezvous)
        waiting = InThread(member.next_rendezvous)
        with TCPStore("127.0.0.1", port, timeout=60, connect_timeout=60) as vanishing:
            vanishing.wait([KEYS.claim(0, 0), KEYS.claim(0, 2)])  # both watch and wait
            gone = Identity("elsewhere", 4242, 1, 4, "t1", "m9")
            vanishing.compare_set(KEYS.of(0, "first"), "", gone.raw)
            vanishing.compare_set(KEYS.claim(0, 1), "", gone.raw)
            vanishing.add(KEYS.of(0, "count"), 1)
            vanishing.set(KEYS.confirmed(0, 1), gone.raw)
        # its connection closed; rank 3 has not arrived; the join timeout is 60 s

        lost = r"rank 1 \(elsewhere pid 4242\) disappeared: its connection to the store closed"
        with pytest.raises(RendezvousConnectionError, match=rf"failed: {lost} before the round"):
            hosting.outcome(timeout=40)
        reported = r"\[reported by rank 0 \(\S+ pid \d+\); this node, rank 2"
        with pytest.raises(RendezvousConnectionError, match=rf"{lost} .*{reported}"):
            waiting.outcome(timeout=40)
        # rank 3 arrives after the verdict: the host still serves it (shutdown waits for it)
        with pytest.raises(RendezvousConnectionError, match=rf"{lost} .*this node, rank 3"):
            late.next_rendezvous()
    finally:
        member.shutdown()
        late.shutdown()
        host.shutdown()


def test_the_watch_dials_its_own_connection_only_when_a_member_vanished() -> None:
    store, server, host = HashStore(), _Server(), Identity("h0", 100, 0, 3, "t0")
    gone = Identity("h1", 101, 1, 3, "t1")
    key = _claimed(store, gone)
    opened: list[HashStore] = []

    def dial() -> HashStore:
        opened.append(store)
        return store

    watch = LostMemberWatch(server, dial, _cfg(0, 3), host, lambda: 5.0, grace=0.0)  # type: ignore[arg-type]
    try:
        assert opened == []  # nothing dialled while every member is there
        [(_, on_close)] = server.watches
        on_close(key, gone.raw)
        store.wait([KEYS.of(0, "done")], timedelta(seconds=30))
        watch._check(0, 1, gone.raw)  # a second check reuses the connection
    finally:
        watch.close()
    assert len(opened) == 1
    assert json.loads(store.get(KEYS.of(0, "done")))["reason"] == "member_lost"


def _watch_that_cannot_dial() -> tuple[_Server, Identity, LostMemberWatch]:
    """Node 0's watch of a 3-node round whose every dial is refused, and rank 1's identity."""
    server, host = _Server(), Identity("h0", 100, 0, 3, "t0")
    gone = Identity("h1", 101, 1, 3, "t1")

    def dial() -> HashStore:
        raise StoreConnectionError("no rendezvous store answered at 127.0.0.1:29400")

    watch = LostMemberWatch(server, dial, _cfg(0, 3), host, lambda: 5.0, grace=0.0)  # type: ignore[arg-type]
    return server, gone, watch


def test_a_watch_that_cannot_dial_says_why_the_loss_was_not_reported(
    events: EventCollector,
) -> None:
    _, gone, watch = _watch_that_cannot_dial()
    try:
        watch._check(0, 1, gone.raw)  # what the timer runs after the grace
    finally:
        watch.close()  # (cancels the next attempt)
    failed = [e for e in events.events if e["event"] == "member_loss_not_reported"]
    [event] = [e for e in failed if e["attempt"] == 1]
    assert event["lost_rank"] == 1
    assert event["error"] == (
        "StoreConnectionError: no rendezvous store answered at 127.0.0.1:29400"
    )


def test_the_hosting_node_holds_no_watch_connection_while_every_member_is_there(
    listen_fd: tuple[int, int],
) -> None:
    fd, port = listen_fd
    host = StaticTCPRendezvous("127.0.0.1", port, 0, 2, "run", 60, listen_fd=fd)
    member = StaticTCPRendezvous("127.0.0.1", port, 1, 2, "run", 60)
    try:
        hosting = InThread(host.next_rendezvous)
        member.next_rendezvous()
        info = hosting.outcome(timeout=40)
        server = info.store.underlying_store.server  # the master TCPStore's server
        # the two nodes' connections, and no third one for the member watch
        assert len(server._conns) == 2
    finally:
        member.shutdown()
        host.shutdown()


def test_a_member_that_fills_the_count_leaves_completion_to_the_arbitrating_host() -> None:
    store = HashStore()
    host = Identity("h0", 100, 0, 2, "t0")
    store.compare_set(KEYS.of(0, "first"), "", host.raw)
    store.set(KEYS.claim(0, 0), host.raw)
    store.set(KEYS.of(0, "arbiter"), host.raw)  # the host decides this round's completion
    store.add(KEYS.of(0, "count"), 1)
    store.set(KEYS.confirmed(0, 0), host.raw)
    member = Identity("h1", 101, 1, 2, "t1")
    started = time.monotonic()
    protocol = RoundProtocol(
        store, _cfg(1, 2), member, 0, started + 0.2, time.monotonic, lambda: 1.0, started=started
    )

    with pytest.raises(RendezvousTimeoutError):  # no host answered: never a world
        protocol.join()
    assert json.loads(store.get(KEYS.of(0, "done")))["status"] == "aborted"


def test_a_check_that_failed_is_tried_again_on_a_fresh_connection_and_names_the_member(
    events: EventCollector,
) -> None:
    store, server, host = HashStore(), _Server(), Identity("h0", 100, 0, 3, "t0")
    gone = Identity("h1", 101, 1, 3, "t1")
    key = _claimed(store, gone)
    dials: list[str] = []

    def dial() -> HashStore:
        dials.append("dial")
        if len(dials) == 1:  # the first check's connection: no reply in time (a busy host)
            raise StoreTimeoutError("no reply to CHECK from the store at 127.0.0.1:29400")
        return store

    watch = LostMemberWatch(server, dial, _cfg(0, 3), host, lambda: 5.0, grace=0.0)  # type: ignore[arg-type]
    try:
        [(_, on_close)] = server.watches
        on_close(key, gone.raw)
        store.wait([KEYS.of(0, "done")], timedelta(seconds=30))
    finally:
        watch.close()
    assert json.loads(store.get(KEYS.of(0, "done")))["reason"] == "member_lost"
    assert dials == ["dial", "dial"]
    [failed] = [e for e in events.events if e["event"] == "member_loss_not_reported"]
    assert (failed["attempt"], failed["retry_in"]) == (1, 0.5)


def test_a_check_is_not_tried_again_once_the_round_has_a_verdict(
    events: EventCollector,
) -> None:
    server, gone, watch = _watch_that_cannot_dial()
    try:
        assert server.on_write is not None
        server.on_write(f"/{KEYS.of(0, 'done')}".encode(), b"{}")  # another node's verdict
        watch._check(0, 1, gone.raw)
        assert not watch._timers  # nothing left to check
    finally:
        watch.close()
    [event] = [e for e in events.events if e["event"] == "member_loss_not_reported"]
    assert event["retry_in"] is None
