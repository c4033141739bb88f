"""The store server: the only server-side I/O. Sockets <-> ``_wire`` <-> ``_kv``.

:class:`StoreServer` binds synchronously in the caller's thread (so a port in use fails at
once, with host, port and errno), then serves on an asyncio loop in a daemon thread. Many
clients at once (the listen backlog and the fd limit are raised for ≥ 4096 connections),
IPv4 and IPv6, port 0 → the ephemeral port is reported back by :attr:`StoreServer.port`.

Where it listens follows the bind rules of :mod:`rdzv.store._bind`. Peers' addresses are never
reverse-resolved.

A request must arrive whole within :data:`PARTIAL_REQUEST_TIMEOUT` seconds of its first byte
(the first request, ``VALIDATE``, within that time of connecting), else the connection is
dropped: a peer that sends half a request and then nothing would otherwise hold a descriptor
forever. A client idle between requests, or blocked in a WAIT, has no partial request and is
never dropped for it. Dropped connections are logged through :class:`rdzv.store._droplog.DropLog`:
the first few in full, the rest as one summary line per interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import threading
from collections import deque
from typing import Final, cast

from rdzv.errors import StoreProtocolError
from rdzv.events import emit
from rdzv.store import _decoder, _wire
from rdzv.store._bind import BACKLOG, bind, bind_plan
from rdzv.store._droplog import DropLog
from rdzv.store._writers import Cancel, OnClose, OnWrite, Selects, WatchingKV

__all__ = ["PARTIAL_REQUEST_TIMEOUT", "StoreServer", "bind_plan"]

_log = logging.getLogger("rdzv.server")

#: Seconds a request may stay incomplete (from its first byte, or from the connect for the
#: first request) before the connection is dropped.
PARTIAL_REQUEST_TIMEOUT: Final = 30.0
_HIGH_WATER: Final = 4 * 1024 * 1024
_MAX_HELD_BYTES: Final = 1024 * 1024
_BATCH: Final = 16
_WATCH_SECONDS: Final = 10.0  # bound of adding a writer watch on the loop thread
_READ_SIZE: Final = 65536
# Why a connection was dropped, as counted in the summaries of rdzv.store._droplog.
_UNDECODABLE: Final = "undecodable request"
_REJECTED: Final = "rejected request"
_OVERSENT: Final = "too many bytes sent while waiting"
_INCOMPLETE: Final = "request left incomplete"


class StoreServer:
    """A TCPStore-protocol server (the bind rules are :mod:`rdzv.store._bind`'s).

    Args:
        host: endpoint host to serve (decides the listen addresses, never resolved
            in reverse).
        port: port to listen on; 0 picks an ephemeral port, read back from :attr:`port`.
        limits: decoding limits per connection.
        listen_fd: take over an already bound socket (torch's ``master_listen_fd``).
        partial_request_timeout: seconds a request may stay incomplete before its
            connection is dropped (see the module doc).

    Raises:
        ValueError: ``port`` is outside 0..65535, or ``partial_request_timeout`` is not a
            positive finite number.
        StoreBindError: (from :meth:`start`) the port is in use or cannot be bound; the
            message names host, port and errno and says why in plain words.
    """

    def __init__(
        self,
        host: str = "",
        port: int = 0,
        *,
        limits: _wire.Limits | None = None,
        listen_fd: int | None = None,
        partial_request_timeout: float = PARTIAL_REQUEST_TIMEOUT,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port!r} is outside 0..65535")
        if not 0 < partial_request_timeout < float("inf"):
            raise ValueError(
                f"partial_request_timeout must be a positive number of seconds, "
                f"got {partial_request_timeout!r}"
            )
        self.partial_request_timeout = partial_request_timeout
        self.drops = DropLog()
        self._summary_timer: asyncio.TimerHandle | None = None
        self.host = host
        self._requested_port = port
        self.limits = limits or _wire.Limits()
        self._listen_fd = listen_fd
        self._sockets: list[socket.socket] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._conns: set[_Connection] = set()
        self._closed = threading.Event()
        self.kv = WatchingKV()
        self.port = port
        self._inbox = memoryview(bytearray(_READ_SIZE))  # see _Connection

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> StoreServer:
        """Bind, listen and start serving in a daemon thread; returns ``self``.

        Raises:
            StoreBindError: the listen address could not be bound.
            RuntimeError: the server was already started.
        """
        if self._thread is not None:
            raise RuntimeError("this StoreServer was already started")
        _raise_fd_limit()
        self._sockets = bind(self.host, self._requested_port, self._listen_fd)
        self.port = self._sockets[0].getsockname()[1]
        loop = _new_loop()
        self._loop = loop
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                for sock in self._sockets:
                    server = loop.run_until_complete(
                        loop.create_server(lambda: _Connection(self), sock=sock, backlog=BACKLOG)
                    )
                    self._servers.append(server)
            except BaseException as exc:  # handed to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"rdzv-store:{self.port}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise failure[0]
        emit(
            _log,
            "server_listening",
            endpoint=f"{self.host}:{self.port}",
            addresses=[s.getsockname()[0] for s in self._sockets],
        )
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving: waiting rdzv clients are told the store closed, all connections
        are closed, the thread is joined (bounded by ``timeout``). Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._closed.is_set():
            return
        self._closed.set()
        if threading.current_thread() is thread:  # e.g. a finalizer the GC ran on the loop
            task = loop.create_task(self._shutdown())  # waiting here would block the loop
            task.add_done_callback(lambda _: loop.stop())
            return
        with contextlib.suppress(RuntimeError):  # loop already stopped
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    async def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        for conn, payload in self.kv.shutdown_notices():
            assert isinstance(conn, _Connection)
            conn.write(payload)
        for conn in list(self._conns):
            conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
        if self._summary_timer is not None:
            self._summary_timer.cancel()
            self._summary_timer = None
        for line in self.drops.close(asyncio.get_running_loop().time()):
            _log.warning("%s (store server on port %s closing)", line, self.port)

    def _dropped(self, peername: object, reason: str, error: StoreProtocolError) -> None:
        """Log (or count, under a flood) one dropped connection; runs on the loop."""
        if isinstance(peername, tuple) and len(peername) >= 2:
            host = str(peername[0])
            peer = f"[{host}]:{peername[1]}" if ":" in host else f"{host}:{peername[1]}"
        else:
            host = peer = "an unknown peer"
        loop = asyncio.get_running_loop()
        line = self.drops.record(loop.time(), peer, host, reason, str(error))
        if line is not None:
            _log.warning("%s", line)
        elif self._summary_timer is None:
            due = self.drops.summary_due
            assert due is not None
            self._summary_timer = loop.call_at(due, self._log_summary)

    def _log_summary(self) -> None:
        self._summary_timer = None
        line = self.drops.summary(asyncio.get_running_loop().time())
        if line is not None:
            _log.warning("%s", line)

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close`."""
        return self._thread is not None and not self._closed.is_set()

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The ``(address, port)`` pairs actually listened on."""
        return [s.getsockname()[:2] for s in self._sockets]

    def watch_writers(
        self, selects: Selects, on_close: OnClose, on_write: OnWrite | None = None
    ) -> Cancel:
        """Call ``on_close(key, value)`` on the loop thread when the connection whose request
        last changed a key accepted by ``selects`` closes (see :mod:`rdzv.store._writers`; not for
        connections that :meth:`close` ends), and ``on_write(key, value)`` when such a key
        changes. The watch starts from what the server recorded since its first request:
        a key written, or whose writer closed, before the call is reported too.
        Thread-safe; returns the function that cancels the watch."""
        loop, thread = self._loop, self._thread
        if loop is None or not self.running or threading.current_thread() is thread:
            return self.kv.watch_writers(selects, on_close, on_write)
        done = threading.Event()
        cancel: list[Cancel] = []

        def add() -> None:  # on the loop thread, in order with the requests
            cancel.append(self.kv.watch_writers(selects, on_close, on_write))
            done.set()

        try:
            loop.call_soon_threadsafe(add)
        except RuntimeError:  # the loop closed meanwhile: no request runs any more
            return self.kv.watch_writers(selects, on_close, on_write)
        if not done.wait(_WATCH_SECONDS):  # the loop stopped meanwhile
            return self.kv.watch_writers(selects, on_close, on_write)
        return cancel[0]

    def __enter__(self) -> StoreServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (the ``fast`` extra; it serves requests faster), else the
    standard library's loop. ``RDZV_LOOP=asyncio`` forces the standard loop."""
    if os.environ.get("RDZV_LOOP", "") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
            return loop
    return asyncio.new_event_loop()


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class _Connection(asyncio.BufferedProtocol):
    """One client connection: bytes in, decoded requests to the KV, replies out.

    Bytes are received into the server's one read buffer (every connection is served on
    the loop's thread, one read at a time) and decoded from there, so a read allocates
    nothing.

    Memory per connection stays bounded: requests are applied in small batches and not at
    all while the peer leaves more than ``_HIGH_WATER`` bytes of replies unread (reading
    pauses too), and a peer may send at most ``_MAX_HELD_BYTES`` while it waits.

    Descriptors stay bounded too: ``partial_since`` is when the request still incomplete
    began (the connect, for the first request; None when no request is incomplete), and one
    timer per such connection drops it once that is ``partial_request_timeout`` ago. Time
    spent with reading paused by us does not count against the peer.
    """

    def __init__(self, server: StoreServer) -> None:
        self.server = server
        self.decoder = _decoder.RequestDecoder(server.limits)
        self.transport: asyncio.Transport
        self.pending: deque[_wire.Request] = deque()
        self.held_bytes = 0
        self.dropped = False
        self.decoded_any = False
        self.reading_paused = False
        self.partial_since: float | None = None
        self.partial_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        transport = self.transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=_HIGH_WATER)
        self.server._conns.add(self)
        self.server.kv.open(self)
        self.partial_since = asyncio.get_running_loop().time()  # the first request is due
        self._arm_partial_timer(self.partial_since)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server._inbox

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server._inbox[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        if self.server.kv.is_waiting(self):
            self.held_bytes += len(data)
            if self.held_bytes > _MAX_HELD_BYTES:
                self.server.kv.close(self)
                self.drop(
                    _OVERSENT,
                    StoreProtocolError(
                        f"sent more than {_MAX_HELD_BYTES} bytes while waiting for keys"
                    ),
                )
                return
        else:
            self.held_bytes = 0
        requests = self.decoder.feed(data)
        if requests:
            self.decoded_any = True
        if not self.decoder.buffered:
            self.partial_since = None
        elif requests or self.partial_since is None:
            # A new request began in ``data``; a trickle of bytes does not restart the clock.
            self.partial_since = asyncio.get_running_loop().time()
            self._arm_partial_timer(self.partial_since)
        if requests:
            self.pending.extend(requests)
        if self.pending or self.decoder.error is not None:
            self._pump()

    def _arm_partial_timer(self, since: float) -> None:
        if self.partial_timer is None:
            loop = asyncio.get_running_loop()
            when = since + self.server.partial_request_timeout
            self.partial_timer = loop.call_at(when, self._check_partial)

    def _check_partial(self) -> None:
        """Timer callback: drop the connection if its request is incomplete for too long."""
        self.partial_timer = None
        since = self.partial_since
        if since is None or self.dropped:
            return
        now = asyncio.get_running_loop().time()
        if self.reading_paused:  # we are not reading: the clock restarts when we do
            self.partial_since = since = now
        bound = self.server.partial_request_timeout
        if now < since + bound:
            self._arm_partial_timer(since)
            return
        received = self.decoder.buffered
        if self.decoded_any:
            what = (
                f"left a request incomplete for longer than {bound:g} s "
                f"({received} bytes of it received)"
            )
        elif received:
            what = (
                f"sent only {received} bytes of its first request within {bound:g} s of connecting"
            )
        else:
            what = f"sent no request within {bound:g} s of connecting"
        self.server.kv.close(self)
        self.drop(_INCOMPLETE, StoreProtocolError(what))

    def _pump(self) -> None:
        kv = self.server.kv
        now = asyncio.get_running_loop().time()
        pending = self.pending
        while pending and not self.dropped:
            if self.transport.get_write_buffer_size() > _HIGH_WATER:
                self._pause_reading()  # resume_writing pumps again
                return
            if len(pending) <= _BATCH:  # the common case: one read, a request or two
                batch = list(pending)
                pending.clear()
            else:
                batch = [pending.popleft() for _ in range(_BATCH)]
            outcome = kv.feed(self, batch, now)
            for conn, chunks in outcome.parts.items():  # Outcome.replies, without a list
                assert isinstance(conn, _Connection)
                conn.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
            if outcome.dropped:
                for conn, error in outcome.dropped.items():
                    assert isinstance(conn, _Connection)
                    conn.drop(_REJECTED, error)
        if self.decoder.error is not None and not self.dropped:
            kv.close(self)
            self.drop(_UNDECODABLE, self.decoder.error)

    def write(self, payload: bytes) -> None:
        if payload and not self.transport.is_closing():
            self.transport.write(payload)

    def drop(self, reason: str, error: StoreProtocolError) -> None:
        self.dropped = True
        self.pending.clear()
        self.server._dropped(self.transport.get_extra_info("peername"), reason, error)
        self.transport.close()

    def _pause_reading(self) -> None:
        self.reading_paused = True
        self.transport.pause_reading()

    def pause_writing(self) -> None:
        # The peer is not reading its replies: stop reading its requests (bounded memory).
        self._pause_reading()

    def resume_writing(self) -> None:
        if not self.dropped:
            self.reading_paused = False
            self.transport.resume_reading()
            self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.dropped = True
        self.pending.clear()
        if self.partial_timer is not None:
            self.partial_timer.cancel()
            self.partial_timer = None
        self.server._conns.discard(self)
        self.server.kv.close(self)
        self.server.kv.writer_closed(self, notify=not self.server._closed.is_set())
