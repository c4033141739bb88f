"""Hostile input against a live StoreServer: the server survives, other clients don't notice.

Most tests run the server in a subprocess (``server_process``) so its memory can be
measured with psutil; after each attack the server is still running, a legitimate client's
keys and operations are intact, a new client can connect, and the server's RSS grew by less
than :data:`RSS_SLACK`. The memory-bound and log-flood tests use an in-process server whose
partial-request bound is :data:`BOUND` seconds. The bounds themselves (the handshake
deadline, the buffer budget, slow clients never cut) are ``test_server_bounds.py``'s.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import resource
import signal
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest
from raw_peer import (
    BOUND,
    HALF_SET,
    HTTP,
    VALIDATE,
    drop_lines,
    greeted,
    raw,
    read_until_closed,
    signal_when_waiting,
)

from conftest import InThread, ServerProcess
from rdzv.errors import StoreClosedError
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer
from rdzv.store.server._bounds import READ_SIZE, SPENT_READ_SIZE
from rdzv.store.server._droplog import FULL_LINES, SUMMARY_INTERVAL
from rdzv.store.wire import _wire

RSS_SLACK = 64 * 1024 * 1024
HUGE = 4 * 1024**3


def _rss(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


def _ensure_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} is below the {needed} descriptors needed")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    except (ValueError, OSError) as exc:
        pytest.skip(f"cannot raise RLIMIT_NOFILE to {needed}: {exc}")


@pytest.fixture
def legit(server_process: ServerProcess) -> Iterator[TCPStore]:
    """A well-behaved client of ``server_process`` holding the key ``keep``."""
    client = TCPStore(server_process.host, server_process.port, timeout=10.0)
    try:
        client.set("keep", "kept")
        client.add("count", 1)
        yield client
    finally:
        client.close()


@pytest.fixture
def server() -> Iterator[StoreServer]:
    """An in-process StoreServer on 127.0.0.1, closed afterwards."""
    with StoreServer("127.0.0.1", 0) as running:
        yield running


def _assert_healthy(server_process: ServerProcess, legit: TCPStore, rss_before: int) -> None:
    """The server runs, ``legit``'s keys and ops are intact, RSS grew by < RSS_SLACK.

    It first connects a newcomer and makes one round trip with it: accepts are FIFO and the
    attackers' bytes were already queued, so by then the server has accepted and read every
    connection opened before this call.
    """
    with TCPStore(server_process.host, server_process.port, timeout=10.0) as newcomer:
        assert newcomer.get("keep") == b"kept"
        assert server_process.proc.poll() is None, "the store server process died"
        first = int(legit.get("count"))
        assert legit.add("count", 1) == first + 1
        legit.set("after", "attack")
        assert newcomer.get("after") == b"attack"
        assert legit.multi_get(["keep", "after"]) == [b"kept", b"attack"]
    grown = _rss(server_process.pid) - rss_before
    assert grown < RSS_SLACK, f"the server's RSS grew by {grown / 2**20:.1f} MiB"


# --- garbage on the wire ------------------------------------------------------------------


def test_random_bytes_from_many_connections_do_not_disturb_the_server(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    before = _rss(server_process.pid)
    rng = random.Random(20261202)
    for i in range(300):
        head = VALIDATE if i % 2 else b""
        payload = head + rng.randbytes(rng.randint(1, 4096))
        # The server may drop the connection while we are still sending.
        with raw(server_process.port) as sock, contextlib.suppress(OSError):
            sock.sendall(payload)
    _assert_healthy(server_process, legit, before)


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(bytes([_wire.Op.SET]) + struct.pack("<Q", HUGE) + b"k" * 1000, id="key"),
        pytest.param(
            bytes([_wire.Op.SET]) + _wire.encode_bytes(b"/k") + struct.pack("<Q", HUGE),
            id="value",
        ),
        pytest.param(bytes([_wire.Op.CHECK]) + struct.pack("<Q", HUGE), id="key-count"),
        pytest.param(bytes([_wire.Op.MULTI_SET]) + struct.pack("<Q", 2**64 - 1), id="max-u64"),
    ],
)
def test_a_length_prefix_claiming_4_gib_drops_only_that_connection(
    server_process: ServerProcess, legit: TCPStore, frame: bytes
) -> None:
    before = _rss(server_process.pid)
    with raw(server_process.port) as sock:
        sock.sendall(VALIDATE + frame)
        assert read_until_closed(sock) == b""
    _assert_healthy(server_process, legit, before)


def test_an_http_request_is_answered_by_closing_the_connection(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    before = _rss(server_process.pid)
    with raw(server_process.port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
        assert read_until_closed(sock) == b""
    _assert_healthy(server_process, legit, before)


@pytest.mark.parametrize(
    "partial",
    [
        pytest.param(VALIDATE[:3], id="half-validate"),
        pytest.param(VALIDATE + bytes([_wire.Op.SET]) + b"\x02\x00\x00", id="half-length"),
        pytest.param(
            VALIDATE
            + bytes([_wire.Op.SET])
            + _wire.encode_bytes(b"/keep")
            + struct.pack("<Q", 1024 * 1024)
            + b"x" * (512 * 1024),
            id="half-a-1-mib-value",
        ),
    ],
)
def test_half_a_frame_then_close_changes_nothing(
    server_process: ServerProcess, legit: TCPStore, partial: bytes
) -> None:
    before = _rss(server_process.pid)
    with raw(server_process.port) as sock:
        sock.sendall(partial)
    _assert_healthy(server_process, legit, before)


def test_a_thousand_idle_connections_held_open_do_not_starve_anyone(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    _ensure_fd_limit(2500)
    before = _rss(server_process.pid)
    held: list[socket.socket] = []
    try:
        for i in range(1000):
            sock = raw(server_process.port)
            held.append(sock)
            if i % 2:  # half of them complete a handshake, then idle
                sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(i)))
        for i, sock in enumerate(held):
            if i % 2:
                assert sock.recv(4) == _wire.encode_u32(i)
        _assert_healthy(server_process, legit, before)
    finally:
        for sock in held:
            sock.close()
    _assert_healthy(server_process, legit, before)


def test_requests_pipelined_behind_a_pending_wait_cannot_grow_memory_without_bound(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    before = _rss(server_process.pid)
    big_set = _wire.encode_request(_wire.Set(b"/x", b"y" * 2**20))
    with raw(server_process.port) as sock:
        sock.sendall(VALIDATE + _wire.encode_request(_wire.Wait((b"/never",))))
        with contextlib.suppress(OSError):  # dropping us would be a fine answer
            for _ in range(100):
                sock.sendall(big_set)
        _assert_healthy(server_process, legit, before)


def test_a_client_that_never_reads_its_replies_cannot_grow_memory_without_bound(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    legit.set("blob", b"z" * 2**20)
    assert legit.check(["blob"])  # SET has no reply: make sure it landed before the GETs
    before = _rss(server_process.pid)
    get = _wire.encode_request(_wire.Get(b"/blob"))
    with raw(server_process.port) as sock:
        sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(1)))
        assert sock.recv(4) == _wire.encode_u32(1)  # the server is reading this connection
        sock.sendall(get * 100)
        _assert_healthy(server_process, legit, before)


# --- protocol violations from otherwise valid clients ---------------------------------------


def test_add_on_a_non_integer_drops_only_that_connection(server: StoreServer) -> None:
    waiter_store = TCPStore("127.0.0.1", server.port, timeout=15.0)
    offender = TCPStore("127.0.0.1", server.port, timeout=15.0)
    bystander = TCPStore("127.0.0.1", server.port, timeout=15.0)
    try:
        waiting = signal_when_waiting(server)
        waiter = InThread(waiter_store.get, "released")
        assert waiting.wait(10), "the waiter never reached the server"
        bystander.set("word", "abc")
        assert bystander.check(["word"])  # SET has no reply: make sure it landed
        with pytest.raises(StoreClosedError, match="not an integer"):
            offender.add("word", 1)
        with pytest.raises(StoreClosedError):
            offender.check(["word"])
        bystander.set("released", "yes")
        assert waiter.outcome() == b"yes"
        assert bystander.get("word") == b"abc"
        assert bystander.add("n", 2) == 2
        with TCPStore("127.0.0.1", server.port, timeout=15.0) as again:
            assert again.get("word") == b"abc"
    finally:
        for store in (waiter_store, offender, bystander):
            store.close()


@pytest.mark.parametrize(
    "prelude", [pytest.param(VALIDATE, id="after-validate"), pytest.param(b"", id="first")]
)
def test_an_unknown_opcode_drops_only_that_connection(server: StoreServer, prelude: bytes) -> None:
    waiter_store = TCPStore("127.0.0.1", server.port, timeout=15.0)
    bystander = TCPStore("127.0.0.1", server.port, timeout=15.0)
    try:
        waiting = signal_when_waiting(server)
        waiter = InThread(waiter_store.get, "released")
        assert waiting.wait(10), "the waiter never reached the server"
        with raw(server.port) as sock:
            sock.sendall(prelude + bytes([99]) + b"\x00" * 16)
            assert read_until_closed(sock) == b""
        bystander.set("released", "yes")
        assert waiter.outcome() == b"yes"
        assert bystander.add("n", 1) == 1
    finally:
        waiter_store.close()
        bystander.close()


def test_a_wrong_magic_in_validate_drops_the_connection(server: StoreServer) -> None:
    with raw(server.port) as sock:
        wrong = _wire.encode_request(_wire.Validate(0xDEADBEEF))
        sock.sendall(wrong + _wire.encode_request(_wire.Ping(7)))
        assert read_until_closed(sock) == b""
    with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
        assert client.add("n", 1) == 1


def test_clients_that_vanish_mid_wait_leave_no_waiters_behind(server: StoreServer) -> None:
    socks = [raw(server.port) for _ in range(200)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(VALIDATE + _wire.encode_request(_wire.Wait((f"/k{i}".encode(),))))
    finally:
        for sock in socks:
            sock.close()
    with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
        # Two round trips: the server's loop has processed every close by then, and it
        # stays idle while this client is (so reading its state from here is safe).
        assert not client.check(["k0"])
        assert not client.check(["k0"])
        assert server.kv.waiting() == {}
        for i in range(200):  # nobody is woken: no stale session may be touched
            client.set(f"k{i}", "v")
        assert client.add("n", 1) == 1
        assert client.get("k199") == b"v"


# --- the server going away ------------------------------------------------------------------


def test_waiting_clients_get_store_closed_promptly_when_the_server_closes(
    server: StoreServer,
) -> None:
    clients = [TCPStore("127.0.0.1", server.port, timeout=60.0) for _ in range(4)]
    try:
        waiting = signal_when_waiting(server, count=4)
        blocked = [
            InThread(clients[0].get, "never"),
            InThread(clients[1].wait, ["never", "nor-this"]),
            InThread(clients[2].multi_get, ["never"]),
            InThread(clients[3].queue_pop, "never"),
        ]
        assert waiting.wait(10), "the four waiters never all reached the server"
        server.close()
        for thread in blocked:
            with pytest.raises(StoreClosedError, match="shut down while this client waited"):
                thread.outcome(timeout=15.0)
    finally:
        for client in clients:
            client.close()


def test_a_waiting_client_gets_store_closed_promptly_when_the_server_process_is_killed(
    server_process: ServerProcess,
) -> None:
    with TCPStore(server_process.host, server_process.port, timeout=60.0) as client:
        getter = InThread(client.get, "never")
        assert not getter.done.wait(0.2), "get returned for a key nobody set"
        server_process.proc.send_signal(signal.SIGKILL)
        server_process.proc.wait(timeout=10)
        with pytest.raises(StoreClosedError, match=r"closed the connection|lost the connection"):
            getter.outcome(timeout=15.0)
        with pytest.raises(StoreClosedError):
            client.check(["never"])


# --- the log under a flood ------------------------------------------------------------------


def test_a_flood_of_garbage_connections_logs_a_bounded_number_of_lines_that_count_every_drop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="rdzv.server")
    garbage, lorises = 200, 40
    started = time.monotonic()
    server = StoreServer("127.0.0.1", 0, partial_request_timeout=BOUND).start()
    held: list[socket.socket] = []
    try:
        with TCPStore("127.0.0.1", server.port, timeout=30.0) as legit_client:
            for _ in range(lorises):
                held.append(raw(server.port))
                held[-1].sendall(VALIDATE[:3])
            for i in range(garbage):
                with raw(server.port) as sock:
                    sock.sendall(HTTP)
                    assert read_until_closed(sock) == b""
                legit_client.set(f"k{i}", "v")
            for sock in held:
                assert read_until_closed(sock, timeout=60) == b""
            assert legit_client.get("k199") == b"v"
    finally:
        for sock in held:
            sock.close()
        server.close()
    elapsed = time.monotonic() - started
    lines = drop_lines(caplog.records)
    full = [line for line in lines if line.startswith("dropping store connection from")]
    assert len(full) == FULL_LINES
    assert full[-1].endswith(f"(further drops are summarised every {SUMMARY_INTERVAL:g} s)")
    summarised = [
        int(m.group(1))
        for m in (re.match(r"dropped (\d+) more store connections? in the last", x) for x in lines)
        if m
    ]
    assert FULL_LINES + sum(summarised) == garbage + lorises
    assert lines[-1] == (
        f"dropped {garbage + lorises} store connections in all while serving "
        f"({FULL_LINES} logged one by one, {garbage + lorises - FULL_LINES} summarised): "
        f"{garbage} undecodable request, {lorises} request left incomplete "
        f"(store server on port {server.port} closing)"
    )
    # One summary per interval (the last one at close) and the total: bounded, not per drop.
    assert len(lines) <= FULL_LINES + int(elapsed / SUMMARY_INTERVAL) + 3, lines


# --- what hostile connections hold: bounded, and released --------------------------------------

SMALL = _wire.Limits(max_value=1024 * 1024, max_frame=1024 * 1024 + 4096)


def _send_some(sock: socket.socket, data: bytes) -> None:
    """Send what the kernel takes now (the server may have stopped reading, or dropped us)."""
    sock.setblocking(False)
    with contextlib.suppress(OSError):
        sock.send(data)


def _on_loop(server: StoreServer, fn: Callable[[], Any]) -> Any:
    """``fn()`` run on the server's loop thread (where its state is consistent)."""
    done = threading.Event()
    result: list[Any] = []
    assert server._loop is not None
    server._loop.call_soon_threadsafe(lambda: (result.append(fn()), done.set()))
    assert done.wait(30), "the server's loop did not run the call"
    return result[0]


def _until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:g} s"
        time.sleep(0.05)


def test_hostile_connections_of_every_kind_hold_at_most_the_budget_and_release_it_on_close() -> (
    None
):
    _ensure_fd_limit(2500)
    rng = random.Random(20261204)
    budget = SMALL.max_frame
    partial = _wire.encode_request(_wire.Set(b"/p", b"x" * 900 * 1024))[: 200 * 1024]
    not_validate = bytes([_wire.Op.SET]) + _wire.encode_bytes(b"/k") + struct.pack("<Q", 2**23)
    kinds: list[Callable[[int], socket.socket]] = [
        greeted,  # then a partial frame of 200 KiB
        raw,  # garbage
        greeted,  # a slow sender, a few bytes at a time
        raw,  # a first request that is not VALIDATE
        raw,  # half a VALIDATE, never completed
    ]
    first = [partial, rng.randbytes(4096), HALF_SET[:3], not_validate + b"y" * 60_000, VALIDATE[:2]]
    held: list[socket.socket] = []
    with StoreServer(
        "127.0.0.1", 0, limits=SMALL, buffer_budget=budget, partial_request_timeout=BOUND
    ) as server:
        try:
            with TCPStore("127.0.0.1", server.port, timeout=30.0) as legit_client:
                for i in range(500):
                    sock = kinds[i % 5](server.port)
                    held.append(sock)
                    _send_some(sock, first[i % 5])
                    if i % 5 == 2:
                        _send_some(sock, HALF_SET[3:6])
                    if i % 50 == 0:
                        legit_client.set(f"k{i}", str(i))
                for sock in held[2::5]:  # the slow senders go on, slowly
                    _send_some(sock, HALF_SET[6:9])
                assert legit_client.multi_get(["k0", "k450"]) == [b"0", b"450"]

                def per_connection() -> tuple[int, int]:
                    greeted_most = max(c.partial for c in server._conns)
                    unvalidated_most = max(
                        (c.decoder.buffered for c in server.bounds.unvalidated), default=0
                    )
                    return greeted_most, unvalidated_most

                greeted_most, unvalidated_most = _on_loop(server, per_connection)
                assert greeted_most <= SMALL.max_frame + READ_SIZE
                assert unvalidated_most < len(VALIDATE)
                # The budget, the read that spent it, the one request read on past it, and a
                # short read of each connection that began a request while it was spent.
                spent_reads = SPENT_READ_SIZE * len(held)
                assert server.bounds.peak <= budget + READ_SIZE + SMALL.max_frame + spent_reads
                for sock in held:
                    sock.close()
                _until(lambda: len(server._conns) == 1, "closing every hostile connection")
                assert legit_client.add("n", 1) == 1

                def left() -> dict[str, int]:
                    assert server._loop is not None
                    return {
                        "held": server.bounds.held,
                        "partials": len(server.bounds.partials),
                        "starved": len(server.bounds.starved),
                        "unvalidated": len(server.bounds.unvalidated),
                        "timers": len(server._loop._timers),
                    }

                after = _on_loop(server, left)
                assert after["timers"] < 10, "closed connections still have timers"
                del after["timers"]
                assert after == dict.fromkeys(after, 0)
        finally:
            for sock in held:
                sock.close()


def test_the_servers_memory_returns_after_a_thousand_partial_frames_close(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    _ensure_fd_limit(2500)
    before = _rss(server_process.pid)
    partial = _wire.encode_request(_wire.Set(b"/p", b"x" * 2**20))[: 60 * 1024]
    held: list[socket.socket] = []
    try:
        for _ in range(1000):
            held.append(greeted(server_process.port))
            _send_some(held[-1], partial)
        assert legit.get("keep") == b"kept"
    finally:
        for sock in held:
            sock.close()
    assert legit.add("count", 1) == 2
    _until(
        lambda: _rss(server_process.pid) - before < 16 * 2**20,
        f"the server's RSS returning to {before / 2**20:.1f} MiB + 16 MiB",
    )


# --- scale ----------------------------------------------------------------------------------


def test_the_server_accepts_and_serves_4096_concurrent_connections(
    server_process: ServerProcess, legit: TCPStore
) -> None:
    count = 4096
    _ensure_fd_limit(count + 512)
    held: list[socket.socket] = []
    try:
        for i in range(count):
            sock = raw(server_process.port)
            held.append(sock)
            sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(i)))
        for i, sock in enumerate(held):
            sock.settimeout(30)
            assert sock.recv(4) == _wire.encode_u32(i)
        server = psutil.Process(server_process.pid)
        mine = [
            c
            for c in server.net_connections(kind="tcp")
            if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == server_process.port
        ]
        assert len(mine) >= count
        assert legit.get("keep") == b"kept"
    finally:
        for sock in held:
            sock.close()
