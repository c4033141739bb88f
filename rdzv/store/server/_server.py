"""The store server: the only server-side I/O. Sockets <-> ``_wire`` <-> ``_kv``.

:class:`StoreServer` binds synchronously in the caller's thread (so a port in use fails at
once, with host, port and errno), then serves on a poller loop (:mod:`rdzv.store.server._loop`;
no asyncio) in a daemon thread. Many clients at once (the listen backlog and the fd limit
are raised for ≥ 4096 connections), IPv4 and IPv6, port 0 → the ephemeral port is reported
back by :attr:`StoreServer.port`.

Where it listens follows the bind rules of :mod:`rdzv.store.server._bind`. Peers' addresses
are never reverse-resolved.

The first request (``VALIDATE``) must arrive within :data:`PARTIAL_REQUEST_TIMEOUT` seconds
of connecting; after that no connection is cut for being slow, only for exceeding a bound on
what it holds: the buffer budget (:data:`rdzv.store.server._bounds.BUFFER_BUDGET` of incomplete
requests over all connections), which cuts only requests stalled for
:data:`PARTIAL_REQUEST_TIMEOUT` and only while it is spent (:mod:`rdzv.store.server._bounds`).
Connections dropped for breaking the protocol are logged through
:class:`rdzv.store.server._droplog.DropLog`: the first few in full, the rest as one summary line per
interval. A connection that spoke the protocol and is cut by a bound is logged in full, every
time (the ``store_client_cut`` event, naming the peer and the bound).

The connections themselves (reading, back-pressure, the partial-request timer) are
:mod:`rdzv.store.server._conn`'s.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading

from rdzv.errors import StoreProtocolError
from rdzv.events import WARNING, emit, get_logger
from rdzv.store.server._bind import bind, bind_plan
from rdzv.store.server._bounds import BUFFER_BUDGET, Bounds, release_memory
from rdzv.store.server._conn import Connection
from rdzv.store.server._descriptors import raise_fd_limit, reserve_descriptors
from rdzv.store.server._droplog import DropLog
from rdzv.store.server._loop import READ, EventLoop, Handler, Timer
from rdzv.store.state._fast import fast_path
from rdzv.store.state._writers import Cancel, OnClose, OnWrite, Selects, WatchingKV
from rdzv.store.wire import _wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["BUFFER_BUDGET", "PARTIAL_REQUEST_TIMEOUT", "StoreServer", "bind_plan"]

_log = get_logger("rdzv.server")

#: Seconds a connection may take to send its first request whole; also how long a request
#: must have been incomplete before the buffer budget, once spent, may cut its connection.
PARTIAL_REQUEST_TIMEOUT: Final = 30.0
_WATCH_SECONDS: Final = 10.0  # bound of adding a writer watch on the loop thread
_ACCEPT_RETRY: Final = 1.0  # seconds without accepting after running out of descriptors
_OUT_OF_RESOURCES: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class StoreServer:
    """A TCPStore-protocol server (the bind rules are :mod:`rdzv.store.server._bind`'s).

    Args:
        host: endpoint host to serve (decides the listen addresses, never resolved
            in reverse).
        port: port to listen on; 0 picks an ephemeral port, read back from :attr:`port`.
        limits: decoding limits per connection.
        listen_fd: take over an already bound socket (torch's ``master_listen_fd``).
        partial_request_timeout: seconds a connection may take to send its first request
            whole, and a request must have been incomplete before the buffer budget may
            cut its connection (see the module doc).
        buffer_budget: bytes of incomplete requests all connections may hold together; at
            least ``limits.max_frame``.
        expected_clients: how many connections the server expects to hold at once (a
            rendezvous: its world size). The process's descriptor table is grown for them
            before the serving thread starts
            (:func:`rdzv.store.server._descriptors.reserve_descriptors`), not one
            accept at a time while they wait.

    Attributes:
        bounds: the handshake deadline and the buffer budget
            (:class:`rdzv.store.server._bounds.Bounds`); ``bounds.held`` and ``bounds.peak`` are the
            bytes of incomplete requests held now and at most so far.
        cuts: connections that spoke the protocol and were cut by a bound (each logged as a
            ``store_client_cut`` event).
        drops: the log of connections dropped for breaking the protocol.

    Raises:
        ValueError: ``port`` is outside 0..65535, ``partial_request_timeout`` is not a
            positive finite number, ``buffer_budget`` is below ``limits.max_frame``, or
            ``expected_clients`` is not a count (an int >= 0).
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
        buffer_budget: int = BUFFER_BUDGET,
        expected_clients: int = 0,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port!r} is outside 0..65535")
        if not 0 < partial_request_timeout < float("inf"):
            raise ValueError(
                f"partial_request_timeout must be a positive number of seconds, "
                f"got {partial_request_timeout!r}"
            )
        self.partial_request_timeout = partial_request_timeout
        self.limits = limits or _wire.Limits()
        if buffer_budget < self.limits.max_frame:
            raise ValueError(
                f"buffer_budget ({buffer_budget} bytes) must hold at least one request of "
                f"limits.max_frame ({self.limits.max_frame} bytes)"
            )
        self.buffer_budget = buffer_budget
        if isinstance(expected_clients, bool) or not isinstance(expected_clients, int):
            raise ValueError(f"expected_clients must be an int, got {expected_clients!r}")
        if expected_clients < 0:
            raise ValueError(f"expected_clients must be 0 or more, got {expected_clients}")
        self.expected_clients = expected_clients
        self.bounds = Bounds(
            partial_request_timeout,
            partial_request_timeout,
            buffer_budget,
            lambda conn: conn.expire(partial_request_timeout),
        )
        self.cuts = 0  # connections that spoke the protocol, cut by a bound
        self.drops = DropLog()
        self._summary_timer: Timer | None = None
        self.host = host
        self._requested_port = port
        self._listen_fd = listen_fd
        self._sockets: list[socket.socket] = []
        self._loop: EventLoop | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[Connection] = set()
        self._closed = threading.Event()
        self._accept_warned = False
        self.kv = WatchingKV()
        # the frequent requests, in place (a wait registered there starts on the loop's clock)
        self.serve_fast = fast_path(self.kv, self.limits, EventLoop.time)
        self.port = port

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> StoreServer:
        """Bind, listen and start serving in a daemon thread; returns ``self``.

        Raises:
            StoreBindError: the listen address could not be bound.
            RuntimeError: the server was already started.
            OSError: the loop's descriptors could not be made (the process is out of them).
        """
        if self._thread is not None:
            raise RuntimeError("this StoreServer was already started")
        raise_fd_limit()
        self._sockets = bind(self.host, self._requested_port, self._listen_fd)
        self.port = self._sockets[0].getsockname()[1]
        reserve_descriptors(self._sockets[0], self.expected_clients)
        try:
            loop = EventLoop()
            for sock in self._sockets:
                sock.setblocking(False)  # a socket taken over by ``listen_fd`` may block
                loop.register(sock, READ, self._acceptor(sock))
        except BaseException:  # out of descriptors, say: leave nothing listening
            for sock in self._sockets:
                sock.close()
            raise
        self._loop = loop
        self.bounds.loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name=f"rdzv-store:{self.port}", daemon=True
        )
        self._thread.start()
        emit(
            _log,
            "server_listening",
            endpoint=f"{self.host}:{self.port}",
            addresses=[s.getsockname()[0] for s in self._sockets],
        )
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving: waiting rdzv clients are told the store closed, all connections
        are closed, the thread is joined (bounded by ``timeout``). Idempotent; callable on
        the loop thread too (a finalizer the garbage collector runs there), where it
        returns at once and the loop stops after the current iteration."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._closed.is_set():
            return
        self._closed.set()
        if loop.is_loop_thread():  # waiting here would block the loop
            loop.call_soon(self._shutdown)
            return
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            loop.call_soon_threadsafe(self._shutdown)
        thread.join(timeout)

    def _shutdown(self) -> None:
        """On the loop thread: notices to the waiters, close everything, stop the loop."""
        loop = self._loop
        assert loop is not None
        for sock in self._sockets:
            with contextlib.suppress(KeyError, OSError):  # unregistered while out of fds
                loop.unregister(sock)
            sock.close()
        for conn, payload in self.kv.shutdown_notices():
            assert isinstance(conn, Connection)
            conn.write(payload)
        for conn in list(self._conns):
            conn.lost()  # sends what is buffered if it can, without waiting
        if self._summary_timer is not None:
            self._summary_timer.cancel()
            self._summary_timer = None
        for line in self.drops.close(loop.time()):
            _dropped_event(f"{line} (store server on port {self.port} closing)")
        loop.stop()

    def _acceptor(self, listener: socket.socket) -> Handler:
        # the listener's family, type and protocol, read once (each read of the properties
        # makes an enum, and socket.accept reads two per connection)
        family, kind, proto = int(listener.family), int(listener.type), listener.proto
        tcp = family in (socket.AF_INET, socket.AF_INET6)
        return lambda mask: self._accept(listener, family, kind, proto, tcp)

    def _accept(
        self, listener: socket.socket, family: int, kind: int, proto: int, tcp: bool
    ) -> None:
        """Accept every pending connection (until the backlog is empty), as
        ``listener.accept()`` does (the listener does not block, so neither does the
        connection's socket until the connection sets it)."""
        loop = self._loop
        assert loop is not None
        while True:
            try:
                fd, peer = listener._accept()  # type: ignore[attr-defined]
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    raise
                self._pause_accepting(listener, exc)
                return
            Connection(
                self,
                loop,
                socket.socket(family, kind, proto, fd),
                peer,
                on_open=self._conns.add,
                on_close=self._conns.discard,
                tcp=tcp,
            )

    def _pause_accepting(self, listener: socket.socket, exc: OSError) -> None:
        """Out of descriptors: stop accepting for a while (epoll would report the
        listener ready in a busy loop), and say so once."""
        loop = self._loop
        assert loop is not None
        if not self._accept_warned:
            self._accept_warned = True
            _log.warning(
                "store server on port %s cannot accept more connections (%s); retrying "
                "every %g s: raise the open-files limit (ulimit -n) of this process",
                self.port,
                exc,
                _ACCEPT_RETRY,
            )
        loop.unregister(listener)

        def resume() -> None:
            if not self._closed.is_set():
                loop.register(listener, READ, self._acceptor(listener))

        loop.call_at(loop.time() + _ACCEPT_RETRY, resume)

    def dropped(self, peername: object, reason: str, error: StoreProtocolError) -> None:
        """Log (or count, under a flood) one dropped connection; runs on the loop."""
        peer, host = _peer(peername)
        loop = self._loop
        assert loop is not None
        line = self.drops.record(loop.time(), peer, host, reason, str(error))
        if line is not None:
            _dropped_event(line, peer)
        elif self._summary_timer is None:
            due = self.drops.summary_due
            assert due is not None
            self._summary_timer = loop.call_at(due, self._log_summary)

    def cut(self, peername: object, bound: str, detail: str) -> None:
        """Log one connection that spoke the protocol, cut by ``bound``; runs on the loop."""
        self.cuts += 1
        emit(
            _log,
            "store_client_cut",
            WARNING,
            message=f"cutting store client {_peer(peername)[0]} (store server on port "
            f"{self.port}): bound '{bound}' exceeded: {detail}",
            peer=_peer(peername)[0],
            bound=bound,
        )

    def _log_summary(self) -> None:
        self._summary_timer = None
        assert self._loop is not None
        line = self.drops.summary(self._loop.time())
        if line is not None:
            _dropped_event(line)
            release_memory()  # a flood of dropped connections left freed memory behind

    @property
    def closing(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed.is_set()

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
        last changed a key accepted by ``selects`` closes (see :mod:`rdzv.store.state._writers`;
        not for connections that :meth:`close` ends), and ``on_write(key, value)`` when such a key
        changes. The watch starts from what the server recorded since its first request:
        a key written, or whose writer closed, before the call is reported too.
        Thread-safe; returns the function that cancels the watch."""
        loop = self._loop
        if loop is None or not self.running or loop.is_loop_thread():
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


def _dropped_event(line: str, peer: str | None = None) -> None:
    """Log a line of the drop log as a WARNING event: ``store_connection_dropped`` for one
    connection (with its ``peer``), ``store_connections_dropped`` for a summary."""
    if peer is None:
        emit(_log, "store_connections_dropped", WARNING, message=line)
    else:
        emit(_log, "store_connection_dropped", WARNING, message=line, peer=peer)


def _peer(peername: object) -> tuple[str, str]:
    """``(peer, host)`` as logged: ``10.0.0.7:51234`` (``[::1]:51234``), ``10.0.0.7``."""
    if isinstance(peername, tuple) and len(peername) >= 2:
        host = str(peername[0])
        return (f"[{host}]:{peername[1]}" if ":" in host else f"{host}:{peername[1]}"), host
    return "an unknown peer", "an unknown peer"
