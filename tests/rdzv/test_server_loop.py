"""The store server's own event loop (``rdzv.store.server._loop``) and what the server builds on it:
timers, calls from other threads, back-pressure that resumes, a peer that resets."""

from __future__ import annotations

import logging
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer
from rdzv.store.server._loop import READ, EventLoop
from rdzv.store.wire import _wire
from tests.rdzv.conftest import REPO_ROOT

T = TypeVar("T")
VALIDATE = _wire.encode_request(_wire.Validate())


@pytest.fixture
def loop() -> Iterator[EventLoop]:
    """An EventLoop running in a thread of its own, stopped and joined afterwards."""
    running = EventLoop()
    thread = threading.Thread(target=running.run_forever, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.stop()
        thread.join(30)
        assert not thread.is_alive()


def _on(loop: EventLoop, call: Callable[[], T]) -> T:
    """Run ``call`` on the loop thread and return its result."""
    done = threading.Event()
    result: list[T] = []

    def run() -> None:
        result.append(call())
        done.set()

    loop.call_soon_threadsafe(run)
    assert done.wait(30), "the loop did not run the call"
    return result[0]


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        assert chunk, f"the server closed after {len(chunks)} of {size} bytes"
        chunks += chunk
    return bytes(chunks)


# --- the loop -----------------------------------------------------------------------------


def test_a_due_timer_runs_and_a_cancelled_one_never_does(loop: EventLoop) -> None:
    fired = threading.Event()
    cancelled_ran = threading.Event()

    def arm() -> None:
        early = loop.call_at(loop.time() + 0.01, cancelled_ran.set)
        loop.call_at(loop.time() + 0.05, fired.set)
        early.cancel()

    loop.call_soon_threadsafe(arm)
    assert fired.wait(30)
    assert not cancelled_ran.is_set()  # it was due first: had it run, it would have by now


def test_calls_from_another_thread_run_on_the_loop_thread_in_order(loop: EventLoop) -> None:
    seen: list[tuple[int, bool]] = []
    for i in range(100):
        loop.call_soon_threadsafe(lambda i=i: seen.append((i, loop.is_loop_thread())))
    _on(loop, lambda: None)
    assert seen == [(i, True) for i in range(100)]
    assert not loop.is_loop_thread()


def test_a_failing_callback_is_logged_and_the_loop_goes_on(
    loop: EventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    def fail() -> None:
        raise ZeroDivisionError("a bug in one callback")

    with caplog.at_level(logging.ERROR, logger="rdzv.server"):
        loop.call_soon_threadsafe(fail)
        assert _on(loop, lambda: 42) == 42
    assert "a scheduled callback failed" in caplog.text
    assert "a bug in one callback" in caplog.text


def test_a_callback_that_requeues_itself_does_not_starve_the_sockets(loop: EventLoop) -> None:
    reader, writer = socket.socketpair()
    got = threading.Event()
    spinning = True

    def spin() -> None:
        if spinning:
            loop.call_soon(spin)

    try:
        _on(loop, lambda: loop.register(reader, READ, lambda mask: got.set()))
        loop.call_soon_threadsafe(spin)
        writer.send(b"x")
        assert got.wait(30), "a busy callback queue kept the loop from its sockets"
    finally:
        spinning = False
        _on(loop, lambda: loop.unregister(reader))
        reader.close()
        writer.close()


def test_one_poll_serves_every_ready_connection_before_the_loop_polls_again() -> None:
    loop = EventLoop()
    real = loop._poller
    returned: list[int] = []  # ready files per poll, in order
    served: list[tuple[int, int]] = []  # (poll number, fd) per handler call

    class CountingPoller:
        def register(self, fd: int, events: int) -> None:
            real.register(fd, events)

        def modify(self, fd: int, events: int) -> None:
            real.modify(fd, events)

        def unregister(self, fd: int) -> None:
            real.unregister(fd)

        def poll(self, timeout: float | None = None) -> list[tuple[int, int]]:
            ready = real.poll(timeout)
            returned.append(len(ready))
            return ready

    loop._poller = CountingPoller()
    pairs = [socket.socketpair() for _ in range(8)]
    fds = sorted(ours.fileno() for ours, _ in pairs)
    try:
        for ours, theirs in pairs:
            ours.setblocking(False)
            theirs.sendall(b"request")  # every connection is readable before the first poll

            def on_read(mask: int, sock: socket.socket = ours) -> None:
                sock.recv(64)
                served.append((len(returned), sock.fileno()))
                if len(served) == len(pairs):
                    loop.stop()

            loop.register(ours, READ, on_read)
        loop.run_forever()
    finally:
        for ours, theirs in pairs:
            ours.close()
            theirs.close()
    assert returned[0] == len(pairs)
    assert sorted(fd for _, fd in served) == fds
    assert [number for number, _ in served] == [1] * len(pairs), "all served after one poll"


def test_a_stopped_loop_refuses_further_calls() -> None:
    loop = EventLoop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    loop.stop()
    thread.join(30)
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="stopped"):
        loop.call_soon_threadsafe(lambda: None)


# --- the server on it -----------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[StoreServer]:
    with StoreServer("127.0.0.1", 0) as running:
        yield running


def test_reading_resumes_once_a_peer_that_stopped_reading_its_replies_drains_them(
    server: StoreServer,
) -> None:
    blob = bytes(range(256)) * 4096  # 1 MiB
    with TCPStore("127.0.0.1", server.port, timeout=30.0) as store:
        store.set("blob", blob)
        assert store.check(["blob"])
    gets = 64  # 64 MiB of replies: far above the server's high-water mark
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(1)))
        assert _recv_exactly(sock, 4) == _wire.encode_u32(1)
        sock.sendall(_wire.encode_request(_wire.Get(b"/blob")) * gets)
        deadline = time.monotonic() + 30
        while not _on(server._loop, lambda: any(c.reading_paused for c in server._conns)):  # type: ignore[arg-type]
            assert time.monotonic() < deadline, "the server never stopped reading the peer"
            time.sleep(0.01)
        with TCPStore("127.0.0.1", server.port, timeout=30.0) as bystander:
            assert bystander.get("blob") == blob  # others are served meanwhile
        reply = struct.pack("<Q", len(blob)) + blob
        for i in range(gets):
            assert _recv_exactly(sock, len(reply)) == reply, f"reply {i} is wrong"
        sock.sendall(_wire.encode_request(_wire.Ping(7)))
        assert _recv_exactly(sock, 4) == _wire.encode_u32(7)
        assert not _on(server._loop, lambda: any(c.reading_paused for c in server._conns))  # type: ignore[arg-type]


def test_a_peer_that_resets_its_connection_is_reported_to_the_writer_watch(
    server: StoreServer,
) -> None:
    closed = threading.Event()
    seen: list[tuple[bytes, bytes | None]] = []

    def on_close(key: bytes, value: bytes | None) -> None:
        seen.append((key, value))
        closed.set()

    server.watch_writers(lambda key: key == b"/claim", on_close)
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        set_claim = _wire.encode_request(_wire.Set(b"/claim", b"mine"))
        sock.sendall(VALIDATE + set_claim + _wire.encode_request(_wire.Ping(3)))
        assert _recv_exactly(sock, 4) == _wire.encode_u32(3)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sock.close()  # with a zero linger: a reset, not a FIN
    assert closed.wait(30), "the server never noticed the reset"
    assert seen == [(b"/claim", b"mine")]
    with TCPStore("127.0.0.1", server.port, timeout=30.0) as newcomer:
        assert newcomer.get("claim") == b"mine"


def test_close_from_another_thread_tells_waiting_clients_and_frees_the_port() -> None:
    server = StoreServer("127.0.0.1", 0).start()
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        probe = _wire.encode_request(_wire.Check((_wire.PROBE_KEY,)))
        sock.sendall(VALIDATE + probe + _wire.encode_request(_wire.Wait((b"/never",))))
        assert _recv_exactly(sock, 1) == _wire.encode_u8(_wire.READY)
    finally:
        server.close()
    try:
        assert _recv_exactly(sock, 1) == _wire.encode_u8(_wire.WAIT_CANCELED)
        assert sock.recv(1) == b""  # then the connection closes
    finally:
        sock.close()
    assert server._thread is not None and not server._thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


_FEW_FDS_SERVER = """
import logging, resource, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
import rdzv.store.server._server as server_module
server_module.raise_fd_limit = lambda: None  # keep the limit set here
resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
server = server_module.StoreServer("127.0.0.1", 0).start()
print(server.port, flush=True)
sys.stdin.read()  # serve until the test closes our stdin
server.close()
"""


def test_a_server_out_of_descriptors_pauses_accepting_and_serves_the_queue_once_some_close() -> (
    None
):
    child = subprocess.Popen(
        [sys.executable, "-c", _FEW_FDS_SERVER],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    conns: list[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        port = int(child.stdout.readline())
        for i in range(80):  # more than the server's 48 descriptors can accept
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            conns.append(sock)
            sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(i)))
        for i in range(20):  # the first ones were accepted before the limit
            assert _recv_exactly(conns[i], 4) == _wire.encode_u32(i)
        for sock in conns[:40]:
            sock.close()
        for i in range(40, 80):  # queued behind the limit: accepted once some closed
            assert _recv_exactly(conns[i], 4) == _wire.encode_u32(i)
        _, err = child.communicate(timeout=60)  # closes its stdin: the server closes
    finally:
        for sock in conns:
            sock.close()
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err
    assert err.count("cannot accept more connections") == 1, err
    assert "raise the open-files limit" in err


def test_a_call_queued_as_the_loop_stops_still_runs() -> None:
    loop = EventLoop()
    ran = threading.Event()
    loop.stop()  # before it runs: the loop ends without serving a single iteration
    loop.call_soon_threadsafe(ran.set)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    assert ran.is_set()
