"""The server's fast path (``rdzv.store.state._fast``) answers and changes exactly what the general
path (the decoder and the KV) does, however the bytes are split into reads.

The connections here are real :class:`~rdzv.store.server._conn.Connection` objects on one end of a
socket pair, the loop not running: each chunk is sent, then the connection's handler reads
it, so a split is exactly the one drawn; the replies are what arrives at the other end.
"""

from __future__ import annotations

import itertools
import logging
import socket
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdzv.store.server import StoreServer
from rdzv.store.server._conn import Connection
from rdzv.store.server._loop import READ, EventLoop
from rdzv.store.state import _fast
from rdzv.store.state._kv import PROBE_KEY, _Session
from rdzv.store.wire import _wire
from rdzv.store.wire import _wire as w

LIMITS = _wire.Limits(max_key=len(PROBE_KEY), max_value=16, max_keys=4)  # the probe fits
VALIDATE = w.encode_request(w.Validate())
KEYS = (b"a", b"b", b"n", b"q", PROBE_KEY, b"k" * 23)  # the last one is over max_key
#: Sent first when drawn: the keys exist, so WAITs return at once more often.
SEED = w.encode_request(w.MultiSet(((b"a", b"1"), (b"b", b"2"), (b"n", b"3"), (b"q", b"4"))))


@dataclass
class Outcome:
    """What a run leaves behind, comparable between runs."""

    replies: list[bytes]
    data: dict[bytes, bytes]
    queues: dict[bytes, list[bytes]]
    writers: dict[bytes, int]
    dropped: list[tuple[int, str, str]]
    rdzv: list[bool | None]  # each connection's mark of rdzv's client (None: forgotten)
    # each connection's blocked wait: its missing keys and the requests held behind it
    waits: list[tuple[list[bytes], list[w.Request]] | None]


class World:
    """A server that is never started, its loop never run, and connections on socket pairs."""

    def __init__(self, count: int, *, fast: bool = True) -> None:
        self.server = StoreServer("127.0.0.1", 0, limits=LIMITS)
        if not fast:
            self.server.serve_fast = lambda conn, src: (0, b"")
        self.loop = EventLoop()
        self.server._loop = self.server.bounds.loop = self.loop
        self.drops: list[tuple[int, str, str]] = []
        self.conns: list[Connection] = []
        self.opened: list[Connection] = []  # what the connections told the server
        self.closed: list[Connection] = []
        self.peers: list[socket.socket] = []
        self.server.dropped = self._dropped  # type: ignore[method-assign]
        for index in range(count):
            ours, theirs = socket.socketpair()
            theirs.setblocking(False)
            self.peers.append(theirs)
            conn = Connection(
                self.server,
                self.loop,
                ours,
                ("127.0.0.1", index),
                on_open=self.opened.append,
                on_close=self.closed.append,
            )
            self.conns.append(conn)

    def _dropped(self, peername: object, reason: str, error: Exception) -> None:
        assert isinstance(peername, tuple)
        self.drops.append((peername[1], reason, str(error)))

    def feed(self, index: int, chunk: bytes) -> None:
        """``chunk`` arrives as one read (a socket pair delivers what was sent, whole)."""
        self.peers[index].sendall(chunk)
        self.conns[index].on_events(READ)

    def outcome(self) -> Outcome:
        replies = []
        for peer in self.peers:
            got = b""
            try:
                while chunk := peer.recv(1 << 16):
                    got += chunk
            except BlockingIOError:
                pass
            replies.append(got)
        kv = self.server.kv
        index = {conn: i for i, conn in enumerate(self.conns)}
        return Outcome(
            replies=replies,
            data=dict(kv.data),
            queues={k: list(q) for k, q in kv.queues.items()},
            writers={k: index[c] for k, c in kv._last_writer.items()},  # type: ignore[index]
            dropped=list(self.drops),
            rdzv=[getattr(kv._sessions.get(conn), "rdzv", None) for conn in self.conns],
            waits=[_wait_of(kv._sessions.get(conn)) for conn in self.conns],
        )

    def close(self) -> None:
        for conn in self.conns:
            conn.lost()
        for peer in self.peers:
            peer.close()
        self.loop.stop()
        self.loop.run_forever()  # stopped already: closes the poller and its sockets


def _wait_of(session: _Session | None) -> tuple[list[bytes], list[w.Request]] | None:
    if session is None or session.waiting is None:
        return None
    return sorted(session.waiting.keys), list(session.held)


@contextmanager
def world(count: int, *, fast: bool = True) -> Iterator[World]:
    """A :class:`World` of ``count`` connections; ``fast=False`` turns the fast path off."""
    made = World(count, fast=fast)
    try:
        yield made
    finally:
        made.close()


def run(prelude: bytes, stream: Sequence[bytes], *, fast: bool) -> Outcome:
    """Connection 0 sends ``prelude`` in one read (say, a WAIT); connection 1 sends the
    reads of ``stream``."""
    with world(2, fast=fast) as made:
        made.feed(0, VALIDATE + prelude)
        for chunk in stream:
            made.feed(1, chunk)
        return made.outcome()


# --- the requests drawn -------------------------------------------------------------------

keys = st.sampled_from(KEYS)
values = st.sampled_from([b"", b"1", b"-7", b" 42x", b"v", b"x" * 17])  # the last: too long
key_lists = st.lists(keys, max_size=5).map(tuple)  # 5 keys: over max_keys
deltas = st.sampled_from([0, 1, -3, 2**62, 2**63 - 1, -(2**63)])

requests = st.one_of(
    st.builds(w.Set, keys, values),
    st.builds(w.Get, keys),
    st.builds(w.Add, keys, deltas),
    st.builds(w.Check, key_lists),
    st.builds(w.Wait, key_lists),
    st.builds(w.MultiGet, key_lists),
    st.builds(w.MultiSet, st.lists(st.tuples(keys, values), max_size=5).map(tuple)),
    st.builds(w.Append, keys, values),
    st.builds(w.CompareSet, keys, values, values),
    st.builds(w.DeleteKey, keys),
    st.builds(w.QueuePush, keys, values),
    st.builds(w.QueuePop, keys),
    st.builds(w.Ping, st.integers(0, 2**32 - 1)),
    st.just(w.CancelWait()),
    st.just(w.GetNumKeys()),
)
encoded = st.one_of(
    requests.map(w.encode_request),
    # what rdzv's client sends for get and multi_get: a WAIT, then a read of the same keys
    st.builds(lambda k: w.encode_request(w.Wait((k,))) + w.encode_request(w.Get(k)), keys),
    st.builds(lambda k: w.encode_request(w.Wait(k)) + w.encode_request(w.MultiGet(k)), key_lists),
    st.just(b"\xfe"),  # an unknown opcode
    st.just(w.encode_request(w.Validate(0x1234))),  # a second VALIDATE, with a bad magic
)
preludes = st.one_of(
    st.just(b""),
    st.builds(lambda k: w.encode_request(w.Wait((k,))), keys),
    st.builds(lambda k: w.encode_request(w.Wait(k)), key_lists),
)


def _splits(stream: bytes) -> Iterator[list[bytes]]:
    """The stream in one read, then in two at every offset."""
    yield [stream]
    for cut in range(1, len(stream)):
        yield [stream[:cut], stream[cut:]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prelude=preludes, seed=st.booleans(), body=st.lists(encoded, min_size=1, max_size=10))
def test_a_stream_split_at_every_offset_gets_the_replies_and_state_of_the_general_path(
    prelude: bytes, seed: bool, body: list[bytes]
) -> None:
    stream = VALIDATE + (SEED if seed else b"") + b"".join(body)
    expected = run(prelude, [stream], fast=False)
    for reads in _splits(stream):
        assert run(prelude, reads, fast=True) == expected, f"split {[len(r) for r in reads]}"


@settings(max_examples=40, deadline=None)
@given(
    prelude=preludes,
    seed=st.booleans(),
    body=st.lists(encoded, min_size=1, max_size=10),
    cuts=st.sets(st.integers(1, 400), max_size=8),
)
def test_any_chunking_gets_the_replies_and_state_of_the_general_path(
    prelude: bytes, seed: bool, body: list[bytes], cuts: set[int]
) -> None:
    stream = VALIDATE + (SEED if seed else b"") + b"".join(body)
    bounds = [0, *sorted(c for c in cuts if c < len(stream)), len(stream)]
    reads = [stream[a:b] for a, b in itertools.pairwise(bounds)]
    assert run(prelude, reads, fast=True) == run(prelude, [stream], fast=False)


# --- the edges, one by one ----------------------------------------------------------------


def test_the_frequent_requests_are_served_without_the_decoder() -> None:
    body = [
        w.Set(b"a", b"1"),
        w.Get(b"a"),
        w.Add(b"n", 2),
        w.Check((b"a", b"n")),
        w.Wait((b"a",)),
        w.MultiSet(((b"b", b"x"), (b"a", b"2"))),
        w.MultiGet((b"a", b"b", b"q")),
        w.Wait((b"a",)),
        w.Get(b"a"),
        w.Wait((b"a", b"b")),
        w.MultiGet((b"a", b"b")),
        w.Append(b"b", b"y"),  # rdzv's joined list
        w.Append(b"j", b"z"),  # a new key
        w.CompareSet(b"c", b"", b"me"),  # rdzv's claim: set
        w.CompareSet(b"c", b"", b"you"),  # claimed already: the current value
        w.CompareSet(b"d", b"old", b"new"),  # missing, expected not empty: expected
        w.CompareSet(b"a", b"2", b"3"),  # swapped
    ]
    with world(1) as made:
        made.feed(0, VALIDATE)
        decoder = made.conns[0].decoder
        with mock.patch.object(decoder, "feed", side_effect=AssertionError("decoder used")):
            made.feed(0, b"".join(w.encode_request(r) for r in body))
        got = made.outcome()
    assert got.replies == [
        w.encode_bytes(b"1")
        + w.encode_i64(2)
        + w.encode_u8(w.READY)
        + w.encode_u8(w.STOP_WAITING)
        + w.encode_bytes(b"2")
        + w.encode_bytes(b"x")
        + w.encode_bytes(b"")
        + w.encode_u8(w.STOP_WAITING)
        + w.encode_bytes(b"2")
        + w.encode_u8(w.STOP_WAITING)
        + w.encode_bytes(b"2")
        + w.encode_bytes(b"x")
        + w.encode_bytes(b"me")
        + w.encode_bytes(b"me")
        + w.encode_bytes(b"old")
        + w.encode_bytes(b"3")
    ]
    assert got.data == {b"a": b"3", b"n": b"2", b"b": b"xy", b"j": b"z", b"c": b"me"}
    assert got.writers == dict.fromkeys([b"a", b"n", b"b", b"j", b"c"], 0)


def test_a_members_count_and_verdict_wait_is_served_without_the_decoder() -> None:
    """rdzv's count read (ADD, SET, APPEND, CHECK, then the WAIT+GET of the verdict, which
    does not exist yet): the wait is registered on the fast path, and the verdict's write
    wakes it with the GET's reply, as on the general path."""
    count = [
        w.Add(b"n", 1),
        w.Set(b"a", b"1"),
        w.Append(b"b", b"0,"),
        w.Check((b"q",)),
        w.Wait((b"v",)),
        w.Get(b"v"),
    ]
    read = b"".join(w.encode_request(r) for r in count)
    got = []
    for fast in (True, False):
        with world(2, fast=fast) as made:
            made.feed(0, VALIDATE)
            made.feed(1, VALIDATE)
            conn = made.conns[0]
            if fast:
                with mock.patch.object(conn.decoder, "feed", side_effect=AssertionError("decoded")):
                    made.feed(0, read)
            else:
                made.feed(0, read)
            waiting = made.outcome()
            made.feed(1, w.encode_request(w.Set(b"v", b"done")))
            got.append((waiting, made.outcome()))
    (waiting, woken), (general_waiting, general_woken) = got
    assert waiting == general_waiting
    assert waiting.replies[0] == w.encode_i64(1) + w.encode_u8(w.NOT_READY)
    assert waiting.waits[0] == ([b"v"], [w.Get(b"v")])
    assert woken == general_woken
    assert woken.replies[0] == w.encode_u8(w.STOP_WAITING) + w.encode_bytes(b"done")
    assert woken.waits == [None, None]


def test_a_wait_then_get_not_last_in_the_read_is_left_to_the_general_path() -> None:
    """Only a WAIT+GET that ends the read is registered on the fast path; a request after
    it (held behind the wait) goes through the decoder, as does a WAIT on a key that only a
    queue holds."""
    wait_get = w.encode_request(w.Wait((b"v",))) + w.encode_request(w.Get(b"v"))
    for tail in (w.Set(b"x", b"1"), w.Get(b"x")):
        with world(1) as made:
            made.feed(0, VALIDATE)
            conn = made.conns[0]
            with mock.patch.object(conn.decoder, "feed", wraps=conn.decoder.feed) as feed:
                made.feed(0, wait_get + w.encode_request(tail))
            assert feed.call_count == 1
            assert made.outcome().waits[0] == ([b"v"], [w.Get(b"v"), tail])
    with world(1) as made:
        made.feed(0, VALIDATE)
        made.server.kv.queues[b"v"] = deque([b"1"])  # a queue's key, with a value: it exists
        conn = made.conns[0]
        with mock.patch.object(conn.decoder, "feed", wraps=conn.decoder.feed) as feed:
            made.feed(0, wait_get)
        assert feed.call_count == 1
        got = made.outcome()
        assert got.waits[0] is None
        assert got.replies[0] == w.encode_u8(w.STOP_WAITING) + w.encode_bytes(b"")


def test_a_handshake_is_served_without_the_decoder() -> None:
    nonce = w.encode_request(w.Ping(0xC0FFEE))
    probe = w.encode_request(w.Check((PROBE_KEY,)))
    with world(1) as made:
        conn = made.conns[0]
        assert conn in made.server.bounds.unvalidated
        with mock.patch.object(conn.decoder, "feed", side_effect=AssertionError("decoder used")):
            made.feed(0, VALIDATE + nonce + probe)
        assert conn not in made.server.bounds.unvalidated  # the handshake deadline is off
        got = made.outcome()
    assert got.replies == [w.encode_u32(0xC0FFEE) + w.encode_u8(w.READY)]
    assert got.rdzv == [True]
    assert got.dropped == []


class CountingSocket:
    """A connection's socket that records every ``send`` (the rest is the real socket's)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sends: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sends.append(bytes(data))
        return self.sock.send(data)

    def __getattr__(self, name: str) -> object:
        return getattr(self.sock, name)


def test_one_read_of_pipelined_requests_is_answered_with_one_send() -> None:
    body = [
        w.Set(b"k", b"v"),
        w.Get(b"k"),
        w.Add(b"c", 5),
        w.MultiGet((b"k", b"c")),
        w.Check((b"k",)),
        w.Get(b"c"),
    ]
    for fast in (True, False):  # the fast path, and the general path (a batch of 6)
        with world(1, fast=fast) as made:
            made.feed(0, VALIDATE)
            counting = CountingSocket(made.conns[0].sock)
            made.conns[0].sock = counting  # type: ignore[assignment]
            made.feed(0, b"".join(w.encode_request(r) for r in body))
            got = made.outcome()
        assert got.replies == [
            w.encode_bytes(b"v")
            + w.encode_i64(5)
            + w.encode_bytes(b"v")
            + w.encode_bytes(b"5")
            + w.encode_u8(w.READY)
            + w.encode_bytes(b"5")
        ]
        assert counting.sends == got.replies, f"fast path {fast}: one send for the read"


def test_a_read_the_fast_path_serves_in_part_is_still_answered_with_one_send() -> None:
    # ADD, SET, APPEND and CHECK (fast), then a WAIT of two keys that blocks, with the
    # MULTI_GET of its keys behind it (general: only a WAIT+GET of one key is registered there)
    body = [
        w.Add(b"c", 1),
        w.Set(b"k", b"v"),
        w.Append(b"q", b"x"),
        w.Check((b"a",)),
        w.Wait((b"k", b"n")),
        w.MultiGet((b"k", b"n")),
    ]
    with world(2) as made:
        made.feed(0, VALIDATE)
        made.feed(1, VALIDATE)
        counting = CountingSocket(made.conns[0].sock)
        made.conns[0].sock = counting  # type: ignore[assignment]
        decoder = made.conns[0].decoder
        with mock.patch.object(decoder, "feed", wraps=decoder.feed) as feed:
            made.feed(0, b"".join(w.encode_request(r) for r in body))
        assert feed.call_count == 1  # the rest of the read went to the general path
        assert counting.sends == [w.encode_i64(1) + w.encode_u8(1 - w.READY)]
        made.feed(1, w.encode_request(w.Set(b"n", b"done")))  # wakes the WAIT
        got = made.outcome()
    woken = w.encode_u8(w.STOP_WAITING) + w.encode_bytes(b"v") + w.encode_bytes(b"done")
    assert counting.sends[1:] == [woken]
    assert got.replies[0] == b"".join(counting.sends)


def test_fast_replies_before_a_request_that_drops_the_connection_are_sent() -> None:
    with world(1) as made:
        made.feed(0, VALIDATE)
        counting = CountingSocket(made.conns[0].sock)
        made.conns[0].sock = counting  # type: ignore[assignment]
        made.feed(0, w.encode_request(w.Get(b"a")) + b"\xfe")  # then an unknown opcode
        assert made.conns[0].dropped
        got = made.outcome()
    assert counting.sends == got.replies == [w.encode_bytes(b"")]


def test_a_set_on_the_fast_path_wakes_a_waiter_on_another_connection() -> None:
    with world(2) as made:
        made.feed(0, VALIDATE + w.encode_request(w.Wait((b"a",))) + w.encode_request(w.Get(b"a")))
        made.feed(1, VALIDATE)
        made.feed(1, w.encode_request(w.Set(b"a", b"here")) + w.encode_request(w.Get(b"a")))
        got = made.outcome()
    assert got.replies == [
        w.encode_u8(w.STOP_WAITING) + w.encode_bytes(b"here"),
        w.encode_bytes(b"here"),
    ]


def test_an_add_and_a_multi_set_on_the_fast_path_wake_their_waiters() -> None:
    with world(3) as made:
        made.feed(0, VALIDATE + w.encode_request(w.Wait((b"n",))))
        made.feed(1, VALIDATE + w.encode_request(w.Wait((b"a", b"b"))))
        made.feed(2, VALIDATE)
        made.feed(2, w.encode_request(w.Add(b"n", 5)))
        made.feed(2, w.encode_request(w.MultiSet(((b"a", b"1"), (b"b", b"2")))))
        got = made.outcome()
    stop = w.encode_u8(w.STOP_WAITING)
    assert got.replies == [stop, stop, w.encode_i64(5)]


def test_a_fast_path_write_is_recorded_as_that_connections_and_heard_by_a_watch() -> None:
    heard: list[tuple[bytes, bytes | None]] = []
    closed: list[tuple[bytes, bytes | None]] = []
    with world(2) as made:
        made.server.kv.watch_writers(
            lambda key: key.startswith(b"c/"),
            lambda key, value: closed.append((key, value)),
            lambda key, value: heard.append((key, value)),
        )
        made.feed(0, VALIDATE)
        made.feed(1, VALIDATE)
        made.feed(
            0, w.encode_request(w.Set(b"c/0", b"claim")) + w.encode_request(w.Set(b"x", b"1"))
        )
        made.feed(1, w.encode_request(w.Add(b"c/n", 1)))
        assert made.outcome().writers == {b"c/0": 0, b"x": 0, b"c/n": 1}
        assert heard == [(b"c/0", b"claim"), (b"c/n", b"1")]
        made.conns[0].lost()
        assert closed == [(b"c/0", b"claim")]


def test_a_watch_whose_callback_fails_is_logged_and_the_request_still_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(key: bytes, value: bytes | None) -> None:
        raise RuntimeError("a watcher's bug")

    heard: list[bytes] = []
    with world(1) as made:
        made.server.kv.watch_writers(lambda key: True, lambda key, value: None, broken)
        made.server.kv.watch_writers(
            lambda key: True, lambda key, value: None, lambda key, value: heard.append(key)
        )
        made.feed(0, VALIDATE)
        with caplog.at_level(logging.ERROR, logger="rdzv.server"):
            made.feed(0, w.encode_request(w.Set(b"k", b"v")) + w.encode_request(w.Get(b"k")))
        got = made.outcome()
    assert got.replies == [w.encode_bytes(b"v")]
    assert heard == [b"k"]  # the next watch still hears the write
    # (rdzv's own record: the torchrun plugin, once loaded, copies it onto torch's logger)
    logged = [r.getMessage() for r in caplog.records if r.name == "rdzv.server"]
    assert logged == ["a writer watch failed on key b'k'"]


def test_a_connection_tells_its_server_it_opened_and_once_that_it_closed() -> None:
    # The server keeps its set of connections through these callbacks (it closes them all
    # when it stops); the connection never reaches into the server for it.
    with world(2) as made:
        assert made.opened == made.conns
        made.feed(0, VALIDATE)
        made.conns[0].lost()
        made.conns[0].lost()  # idempotent: told once
        assert made.closed == [made.conns[0]]


def test_a_fast_path_write_by_the_same_value_keeps_the_earlier_writer() -> None:
    with world(2) as made:
        made.feed(0, VALIDATE)
        made.feed(1, VALIDATE)
        made.feed(0, w.encode_request(w.Set(b"a", b"1")) + w.encode_request(w.Add(b"n", 1)))
        made.feed(1, w.encode_request(w.Set(b"a", b"1")) + w.encode_request(w.Add(b"n", 0)))
        assert made.outcome().writers == {b"a": 0, b"n": 0}
        made.feed(1, w.encode_request(w.MultiSet(((b"a", b"2"), (b"n", b"1")))))
        assert made.outcome().writers == {b"a": 1, b"n": 0}


def test_an_add_on_a_non_integer_still_drops_the_connection_after_the_fast_replies() -> None:
    with world(1) as made:
        made.feed(0, VALIDATE)
        made.feed(
            0,
            w.encode_request(w.Set(b"a", b"x"))
            + w.encode_request(w.Get(b"a"))
            + w.encode_request(w.Add(b"a", 1))
            + w.encode_request(w.Get(b"a")),
        )
        got = made.outcome()
        assert made.conns[0].dropped
    assert got.replies == [w.encode_bytes(b"x")]
    assert [(reason, "'a'" in text) for _, reason, text in got.dropped] == [
        ("rejected request", True)
    ]


def test_a_key_over_the_limit_is_refused_as_the_decoder_refuses_it() -> None:
    with world(1) as made:
        made.feed(0, VALIDATE)
        made.feed(0, w.encode_request(w.Get(b"a")) + w.encode_request(w.Get(b"k" * 23)))
        got = made.outcome()
    assert got.replies == [w.encode_bytes(b"")]
    assert [(reason, "key length 23" in text) for _, reason, text in got.dropped] == [
        ("undecodable request", True)
    ]


def test_replies_past_the_bound_leave_the_rest_of_the_read_to_the_general_path() -> None:
    big = _wire.Limits(max_value=2 * 1024 * 1024)
    with world(1) as made:
        kv = made.server.kv
        conn = made.conns[0]
        made.feed(0, VALIDATE)
        serve = _fast.fast_path(kv, big, time.monotonic, max_reply=3 * 1024 * 1024)
        assert serve(conn, w.encode_request(w.Set(b"a", b"v" * (2 * 1024 * 1024))))[1] == b""
        get = w.encode_request(w.Get(b"a"))
        used, replies = serve(conn, get * 4)
    assert used == 2 * len(get)
    assert replies == w.encode_bytes(b"v" * (2 * 1024 * 1024)) * 2


def test_the_fast_path_reads_the_opcodes_torch_defines() -> None:
    """It compares opcodes as literals: they must be torch's (``QueryType``)."""
    ops = (w.Op.SET, w.Op.GET, w.Op.ADD, w.Op.CHECK, w.Op.WAIT, w.Op.MULTI_GET, w.Op.MULTI_SET)
    assert ops == (1, 3, 4, 5, 6, 10, 11)
