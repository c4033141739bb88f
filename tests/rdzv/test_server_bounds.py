"""The store server's bounds: what they cut, and that they never cut a slow legitimate client.

A connection must complete its first request within the partial-request bound (the only cut
in time alone); after that a client that speaks the protocol is cut only by the buffer
budget, only while it is spent, only when its request has been stalled past the bound, and
the cut is logged in full with the bound named (``rdzv.store.server._bounds``). The servers here run
in-process with a bound of :data:`raw_peer.BOUND` seconds; :func:`raw_peer.bound_passed` is
the clock.
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from raw_peer import (
    BOUND,
    HALF_SET,
    VALIDATE,
    bound_passed,
    drop_lines,
    greeted,
    raw,
    read_until_closed,
    recv_exactly,
    server_events,
    signal_when_waiting,
)

from conftest import InThread
from rdzv.store.client import TCPStore, _connect
from rdzv.store.server import StoreServer
from rdzv.store.server._bounds import BUDGET_BOUND, READ_SIZE
from rdzv.store.wire import _wire

SMALL = _wire.Limits(max_value=1024 * 1024, max_frame=1024 * 1024 + 4096)
BUDGET = SMALL.max_frame


@pytest.fixture
def strict_server() -> Iterator[StoreServer]:
    """An in-process StoreServer on 127.0.0.1 whose partial-request bound is BOUND s."""
    with StoreServer("127.0.0.1", 0, partial_request_timeout=BOUND) as running:
        yield running


def _big_set(key: bytes, size: int) -> bytes:
    return _wire.encode_request(_wire.Set(key, b"v" * size))


def _held_at_least(server: StoreServer, size: int) -> threading.Event:
    """An event set (on the server's loop) once the server holds ``size`` bytes of
    incomplete requests."""
    event = threading.Event()
    bounds = server.bounds
    original = bounds.buffered

    def buffered(conn: Any, before: int, after: int, began: bool) -> None:
        original(conn, before, after, began)
        if bounds.held >= size:
            event.set()

    bounds.buffered = buffered  # type: ignore[method-assign]
    return event


# --- the handshake deadline -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        pytest.param(b"", r"sent no request within 0\.3 s of connecting", id="nothing"),
        pytest.param(
            VALIDATE[:3],
            r"sent only 3 bytes of its first request within 0\.3 s of connecting",
            id="half-validate",
        ),
    ],
)
def test_a_connection_that_never_completes_its_first_request_is_dropped_after_the_bound(
    strict_server: StoreServer, caplog: pytest.LogCaptureFixture, sent: bytes, logged: str
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    with raw(strict_server.port) as sock:
        sock.sendall(sent)
        assert read_until_closed(sock, timeout=60) == b""
    (line,) = drop_lines(caplog.records)
    assert re.match(r"dropping store connection from 127\.0\.0\.1:\d+: ", line), line
    assert re.search(logged, line), line
    with TCPStore("127.0.0.1", strict_server.port, timeout=10.0) as client:
        assert client.add("n", 1) == 1


def test_a_client_held_between_connect_and_handshake_past_the_bound_is_served_on_its_retry(
    strict_server: StoreServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A legitimate client descheduled (a loaded machine, a thread among 512 in one process)
    # between its connect and its first send: the handshake deadline, the only bound in time
    # alone, drops it, the drop is logged naming why, and the client's retry is served.
    caplog.set_level(logging.DEBUG, logger="rdzv")
    dial = _connect._dial
    held: list[int] = []

    def held_once(host: str, port: int, deadline: float | None, bound: float) -> Any:
        sock = dial(host, port, deadline, bound)
        if not held:  # the first attempt sends only once the server has closed on it
            held.append(sock.getsockname()[1])
            assert read_until_closed(sock, timeout=60) == b""
        return sock

    monkeypatch.setattr(_connect, "_dial", held_once)
    with TCPStore("127.0.0.1", strict_server.port, timeout=60.0) as client:
        assert client.add("n", 1) == 1
    (line,) = drop_lines(caplog.records)
    assert line.startswith(f"dropping store connection from 127.0.0.1:{held[0]}: "), line
    assert "sent no request within 0.3 s of connecting" in line, line
    events = [getattr(r, "rdzv_event", {}) for r in caplog.records]
    (connected,) = (e for e in events if e.get("event") == "connected")
    assert connected["attempts"] == 2


def test_a_first_request_that_is_not_validate_is_dropped_at_once_holding_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    with StoreServer("127.0.0.1", 0) as server, raw(server.port) as sock:  # a 30 s bound
        sock.sendall(_big_set(b"/k", 8 * 1024 * 1024)[: 64 * 1024])
        assert read_until_closed(sock, timeout=15) == b""
        (line,) = drop_lines(caplog.records)
        assert re.search(r"its first request \(opcode 1, \d+ bytes so far\) is not VALIDATE", line)
        assert server.bounds.peak == 0, "an unvalidated connection was allowed to buffer"


def test_the_partial_request_bound_must_be_a_positive_number_of_seconds() -> None:
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="partial_request_timeout must be a positive number"):
            StoreServer("127.0.0.1", 0, partial_request_timeout=bad)


def test_the_buffer_budget_must_hold_one_request_of_the_frame_limit() -> None:
    with pytest.raises(ValueError, match=r"buffer_budget \(1000 bytes\) must hold at least one"):
        StoreServer("127.0.0.1", 0, limits=SMALL, buffer_budget=1000)


# --- slow legitimate clients are served ---------------------------------------------------------

_CHECK_10K = _wire.encode_request(
    _wire.Check(tuple(f"__rdzv__/job/round/0/confirmed/{r}".encode() for r in range(10240)))
)


@pytest.mark.parametrize(
    ("request_bytes", "reply"),
    [
        pytest.param(
            HALF_SET + b"x" * 60 + _wire.encode_request(_wire.Get(b"/k")),
            _wire.encode_bytes(b"x" * 100),
            id="a-set-then-get",
        ),
        pytest.param(_CHECK_10K, bytes([1 - _wire.READY]), id="a-check-of-10240-keys"),
        pytest.param(
            _wire.encode_request(_wire.Wait((b"/k",))) + HALF_SET + b"x" * 60,
            bytes([_wire.STOP_WAITING]),
            id="a-set-behind-its-own-wait",
        ),
    ],
)
def test_a_validated_client_that_stalls_mid_request_past_the_bound_is_served_when_it_goes_on(
    strict_server: StoreServer,
    caplog: pytest.LogCaptureFixture,
    request_bytes: bytes,
    reply: bytes,
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    with greeted(strict_server.port) as sock:
        port = sock.getsockname()[1]
        half = len(request_bytes) // 2
        for i in range(0, 16):  # its first bytes one by one, then a stall past the bound
            sock.sendall(request_bytes[i : i + 1])
        sock.sendall(request_bytes[16:half])
        bound_passed(strict_server.port)
        sock.sendall(request_bytes[half:-8])
        bound_passed(strict_server.port)
        for i in range(len(request_bytes) - 8, len(request_bytes)):
            sock.sendall(request_bytes[i : i + 1])
        if reply == bytes([_wire.STOP_WAITING]):  # the wait ends once someone sets /k
            with TCPStore("127.0.0.1", strict_server.port, timeout=10.0) as other:
                other.set("k", "there")
        assert recv_exactly(sock, len(reply)) == reply
    cut_lines = [e["message"] for e in server_events(caplog.records, "store_client_cut")]
    assert not [m for m in drop_lines(caplog.records) + cut_lines if f":{port}" in m], (
        "the slow client was cut"
    )
    assert strict_server.cuts == 0


def test_a_client_that_stops_reading_its_replies_past_the_bound_is_served_when_it_reads(
    strict_server: StoreServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    value = b"z" * 65536
    with TCPStore("127.0.0.1", strict_server.port, timeout=10.0) as setter:
        setter.set("blob", value)
        assert setter.check(["blob"])
    gets = 200  # 13 MiB of replies: the server stops reading this connection meanwhile
    with greeted(strict_server.port) as sock:
        sock.sendall(_wire.encode_request(_wire.Get(b"/blob")) * gets)
        bound_passed(strict_server.port)
        expected = _wire.encode_bytes(value)
        for _ in range(gets):
            assert recv_exactly(sock, len(expected)) == expected
    assert strict_server.cuts == 0


def test_clients_waiting_or_idle_longer_than_the_bound_are_never_dropped(
    strict_server: StoreServer,
) -> None:
    port = strict_server.port
    waiter_store = TCPStore("127.0.0.1", port, timeout=60.0)
    idle = greeted(port)
    try:
        waiting = signal_when_waiting(strict_server)
        waiter = InThread(waiter_store.get, "released")
        assert waiting.wait(10), "the waiter never reached the server"
        bound_passed(port)
        with TCPStore("127.0.0.1", port, timeout=10.0) as setter:
            setter.set("released", "yes")
        assert waiter.outcome() == b"yes"
        assert waiter_store.add("n", 1) == 1
        idle.sendall(_wire.encode_request(_wire.Ping(2)))
        assert recv_exactly(idle, 4) == _wire.encode_u32(2)
    finally:
        waiter_store.close()
        idle.close()


def test_hundreds_of_unfinished_handshakes_are_dropped_while_half_requests_of_clients_are_kept(
    strict_server: StoreServer,
) -> None:
    port = strict_server.port
    lorises: list[socket.socket] = []
    slow = [greeted(port) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(HALF_SET)
        with TCPStore("127.0.0.1", port, timeout=30.0) as legit_client:
            for i in range(400):
                lorises.append(raw(port))
                lorises[-1].sendall(VALIDATE[: i % 4])
                if i % 50 == 0:
                    legit_client.set(f"k{i}", str(i))
            for sock in lorises:
                assert read_until_closed(sock, timeout=60) == b""
            assert legit_client.multi_get(["k0", "k350"]) == [b"0", b"350"]
        for i, sock in enumerate(slow):
            sock.sendall(b"x" * 60 + _wire.encode_request(_wire.Ping(i)))
            assert recv_exactly(sock, 4) == _wire.encode_u32(i)
    finally:
        for sock in lorises + slow:
            sock.close()


def test_a_multi_get_of_25000_keys_that_waits_is_served_when_the_keys_arrive(
    strict_server: StoreServer,
) -> None:
    # rdzv's client sends WAIT and MULTI_GET of the same keys in one write: 1.5 MiB that
    # arrives while the connection waits (the bound on bytes sent while waiting was 1 MiB).
    keys = [f"__rdzv__/a-job-with-a-long-name/round/0/ack/{rank:06d}" for rank in range(25000)]
    with (
        TCPStore("127.0.0.1", strict_server.port, timeout=60.0) as reader,
        TCPStore("127.0.0.1", strict_server.port, timeout=60.0) as writer,
    ):
        waiting = signal_when_waiting(strict_server)
        values = InThread(reader.multi_get, keys)
        assert waiting.wait(30), "the multi_get never reached the server"
        bound_passed(strict_server.port)
        writer.multi_set(keys, [str(i) for i in range(len(keys))])
        assert values.outcome(timeout=60) == [str(i).encode() for i in range(len(keys))]
    assert strict_server.cuts == 0


# --- the buffer budget --------------------------------------------------------------------------


def test_a_spent_budget_cuts_the_request_stalled_past_the_bound_and_logs_the_bound_and_peer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    big = _big_set(b"/pushed", 700 * 1024)
    with (
        StoreServer(
            "127.0.0.1", 0, limits=SMALL, buffer_budget=BUDGET, partial_request_timeout=BOUND
        ) as server,
        greeted(server.port) as staller,
        greeted(server.port) as pusher,
    ):
        stalled = _held_at_least(server, 600 * 1024)
        staller.sendall(_big_set(b"/stalled", 900 * 1024)[: 600 * 1024])
        assert stalled.wait(30), "the server never read the stalled half request"
        bound_passed(server.port)
        pusher.sendall(big + _wire.encode_request(_wire.Ping(9)))  # over the budget
        assert recv_exactly(pusher, 4) == _wire.encode_u32(9)
        assert read_until_closed(staller, timeout=30) == b""
        (cut,) = server_events(caplog.records, "store_client_cut")
        assert cut["bound"] == BUDGET_BOUND
        assert cut["peer"] == f"127.0.0.1:{staller.getsockname()[1]}"
        assert re.search(
            rf"cutting store client 127\.0\.0\.1:{staller.getsockname()[1]} .*bound "
            r"'buffer budget' exceeded: the server holds [\d.]+ MiB of incomplete requests, "
            r"over its budget of 1\.00391 MiB, and this connection's request had been "
            r"incomplete for [\d.]+ s \(614400 bytes of it received\)",
            cut["message"],
        ), cut["message"]
        with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
            assert len(client.get("pushed")) == 700 * 1024
            assert not client.check(["stalled"])
        assert server.bounds.held == 0


def test_a_spent_budget_makes_a_request_that_is_not_stalled_wait_instead_of_cutting_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    first, second = _big_set(b"/first", 900 * 1024), _big_set(b"/second", 900 * 1024)
    with (
        StoreServer("127.0.0.1", 0, limits=SMALL, buffer_budget=BUDGET) as server,  # 30 s
        greeted(server.port) as one,
        greeted(server.port) as two,
    ):
        held = _held_at_least(server, 600 * 1024)
        one.sendall(first[: 600 * 1024])
        assert held.wait(30), "the server never read the first half request"
        over = _held_at_least(server, BUDGET + 1)
        sender = InThread(two.sendall, second + _wire.encode_request(_wire.Ping(2)))
        assert over.wait(30), "the second request never took the server over its budget"
        one.sendall(first[600 * 1024 :] + _wire.encode_request(_wire.Ping(1)))
        assert recv_exactly(one, 4) == _wire.encode_u32(1)
        sender.outcome(timeout=30)
        assert recv_exactly(two, 4) == _wire.encode_u32(2)
        with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
            assert [len(v) for v in client.multi_get(["first", "second"])] == [900 * 1024] * 2
        assert BUDGET < server.bounds.peak <= BUDGET + SMALL.max_frame + READ_SIZE
        assert server.bounds.held == 0
    assert server_events(caplog.records, "store_client_cut") == []
    assert server.cuts == 0


# --- the bounds on a waiting client -----------------------------------------------------------


@pytest.mark.parametrize(
    ("behind_the_wait", "bound", "why"),
    [
        pytest.param(
            _wire.encode_request(_wire.Set(b"/x", b"y" * 700 * 1024)) * 2,
            "bytes sent while waiting",
            r"it sent \d+ bytes while waiting for keys, more than \d+ \(1 MiB and as much "
            r"again as its wait's keys\)",
            id="bytes",
        ),
        pytest.param(
            _wire.encode_request(_wire.Ping(1)) * 4097,
            "requests held behind a WAIT",
            r"more than 4096 requests pipelined behind a pending WAIT",
            id="requests",
        ),
    ],
)
def test_a_waiting_client_cut_by_a_bound_is_logged_with_the_bound_its_peer_and_why(
    caplog: pytest.LogCaptureFixture, behind_the_wait: bytes, bound: str, why: str
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    with StoreServer("127.0.0.1", 0) as server, greeted(server.port) as sock:
        port = sock.getsockname()[1]
        waiting = signal_when_waiting(server)
        sock.sendall(_wire.encode_request(_wire.Wait((b"/never",))))
        assert waiting.wait(30), "the wait never reached the server"
        with contextlib.suppress(OSError):  # cut while sending: what is asserted below
            sock.sendall(behind_the_wait)
        assert read_until_closed(sock, timeout=30) == b""
        (cut,) = server_events(caplog.records, "store_client_cut")
        assert server.cuts == 1
    assert (cut["bound"], cut["peer"]) == (bound, f"127.0.0.1:{port}")
    assert f"cutting store client 127.0.0.1:{port} " in cut["message"]
    assert f"bound '{bound}' exceeded: " in cut["message"]
    assert re.search(why, cut["message"]), cut["message"]
