"""Raw-socket peers of a store server and a hook on its loop, for the tests of its hostile-input
handling and bounds."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

from rdzv.store.server import StoreServer
from rdzv.store.wire import _wire

VALIDATE = _wire.encode_request(_wire.Validate())
#: The partial-request bound (seconds) of the in-process servers that test it.
BOUND = 0.3
HALF_SET = bytes([_wire.Op.SET]) + _wire.encode_bytes(b"/k") + struct.pack("<Q", 100) + b"x" * 40
HTTP = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def raw(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A plain TCP connection to the server (Nagle off: small sends leave one by one)."""
    sock = socket.create_connection((host, port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the server sends before it closes ``sock``; fails if it never closes."""
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        except TimeoutError:
            raise AssertionError(f"the server kept the connection open; it sent {data!r}") from None
        if not chunk:
            return data
        data += chunk


def greeted(port: int) -> socket.socket:
    """A raw connection whose VALIDATE the server has answered (a PING echoed after it)."""
    sock = raw(port)
    sock.sendall(VALIDATE + _wire.encode_request(_wire.Ping(7)))
    assert recv_exactly(sock, 4) == _wire.encode_u32(7)
    return sock


def recv_exactly(sock: socket.socket, size: int, timeout: float = 30.0) -> bytes:
    """``size`` bytes from ``sock``; fails if the server closes it first."""
    sock.settimeout(timeout)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"the server closed the connection after {len(data)} of {size} bytes"
        data += chunk
    return data


def bound_passed(port: int) -> None:
    """Return once the server's partial-request bound has passed for every request already
    begun: a connection opened now that never completes its first request is dropped by the
    server after that bound (a clock that needs no sleep)."""
    with raw(port) as loris:
        loris.sendall(VALIDATE[:3])
        assert read_until_closed(loris, timeout=60) == b""


def signal_when_waiting(server: StoreServer, count: int = 1) -> threading.Event:
    """An event set (on the server's loop) once ``count`` connections are blocked waiting
    (a wait starts in the KV's ``feed``, or in its ``wait_then`` on the fast path)."""
    event = threading.Event()
    kv = server.kv
    original, original_then = kv.feed, kv.wait_then

    def feed(conn: Any, requests: Any, now: float) -> Any:
        outcome = original(conn, requests, now)
        if len(kv.waiting()) >= count:
            event.set()
        return outcome

    def wait_then(conn: Any, key: bytes, then: Any, now: float) -> None:
        original_then(conn, key, then, now)
        if len(kv.waiting()) >= count:
            event.set()

    kv.feed = feed  # type: ignore[method-assign]
    kv.wait_then = wait_then  # type: ignore[method-assign]
    return event


def server_events(records: list[Any], *names: str) -> list[dict[str, Any]]:
    """The store server's events called one of ``names`` among log ``records``, in order
    (each once: a handler that forwards ``rdzv``'s records elsewhere may log them twice)."""
    return [
        r.rdzv_event
        for r in records
        if r.name == "rdzv.server" and getattr(r, "rdzv_event", {}).get("event") in names
    ]


def drop_lines(records: list[Any]) -> list[str]:
    """The lines of the store server's drop log among log ``records``."""
    events = server_events(records, "store_connection_dropped", "store_connections_dropped")
    return [e["message"] for e in events]
