"""The store server: the only server-side I/O. Sockets <-> ``_wire`` <-> ``_kv``.

:class:`StoreServer` binds synchronously in the caller's thread (so a port in use fails at
once, with host, port and errno), then serves on an asyncio loop in a daemon thread. Many
clients at once (the listen backlog and the fd limit are raised for ≥ 4096 connections),
IPv4 and IPv6, port 0 → the ephemeral port is reported back by :attr:`StoreServer.port`.

Bind rules:

* ``""``, ``"::"`` or ``"*"``: the dual-stack wildcard (IPv6 ``::`` accepting IPv4 too), or
  ``0.0.0.0`` where IPv6 is unavailable; ``"0.0.0.0"``: the IPv4 wildcard.
* A loopback endpoint (``localhost``, ``127.0.0.0/8``, ``::1``) listens on loopback only,
  never on all interfaces.
* Any other IP literal binds that address; if it is not an address of this machine the
  server falls back to that family's wildcard and logs why (the bind never fails for it).
* Any other host name binds the dual-stack wildcard, as torch does: a name may resolve to
  different addresses here and on the other nodes (the ``127.0.1.1`` trap of Debian hosts).

Peers' addresses are never reverse-resolved.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno as errno_mod
import ipaddress
import logging
import os
import resource
import socket
import threading
from collections import deque
from typing import Final, cast

from rdzv import _decoder, _wire
from rdzv._kv import KV
from rdzv.errors import StoreBindError, StoreProtocolError
from rdzv.events import emit

__all__ = ["StoreServer", "bind_plan"]

_log = logging.getLogger("rdzv.server")

BACKLOG: Final = 4096
_HIGH_WATER: Final = 4 * 1024 * 1024
_MAX_HELD_BYTES: Final = 1024 * 1024
_BATCH: Final = 16
_LOCALHOST_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_EXPLAIN: Final = {
    errno_mod.EADDRINUSE: "is already in use by another process",
    errno_mod.EACCES: "may not be bound by this user (ports below 1024 need privileges)",
    errno_mod.EADDRNOTAVAIL: "is not an address of this machine",
}


def _is_loopback_name(host: str) -> bool:
    return host.lower() in _LOCALHOST_NAMES or host.lower().endswith(".localhost")


def bind_plan(host: str) -> tuple[list[tuple[socket.AddressFamily, str]], bool]:
    """Decide which addresses to listen on for endpoint host ``host`` (see module doc).

    Returns:
        ``(addresses, may_fall_back)``: ``(family, address)`` pairs to bind, and whether a
        bind that fails because the address is not local may fall back to the wildcard.
    """
    if host in ("", "::", "*"):
        return ([(socket.AF_INET6, "::")] if socket.has_ipv6 else [(socket.AF_INET, "")]), False
    if host == "0.0.0.0":
        return [(socket.AF_INET, "0.0.0.0")], False
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if _is_loopback_name(host):
            plan = [(socket.AF_INET, "127.0.0.1")]
            if socket.has_ipv6:
                plan.append((socket.AF_INET6, "::1"))
            return plan, False
        return bind_plan("")[0], False
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return [(family, str(ip))], not ip.is_loopback


class StoreServer:
    """A TCPStore-protocol server (see the module doc for the bind rules).

    Args:
        host: endpoint host to serve (decides the listen addresses, never resolved
            in reverse).
        port: port to listen on; 0 picks an ephemeral port, read back from :attr:`port`.
        limits: decoding limits per connection.
        listen_fd: take over an already bound socket (torch's ``master_listen_fd``).

    Raises (from :meth:`start`):
        StoreBindError: the port is in use or cannot be bound; the message names host,
            port and errno and says why in plain words.
    """

    def __init__(
        self,
        host: str = "",
        port: int = 0,
        *,
        limits: _wire.Limits | None = None,
        listen_fd: int | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port!r} is outside 0..65535")
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
        self.kv = KV()
        self.port = port

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
        self._sockets = self._bind()
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

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`close`."""
        return self._thread is not None and not self._closed.is_set()

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The ``(address, port)`` pairs actually listened on."""
        return [s.getsockname()[:2] for s in self._sockets]

    def __enter__(self) -> StoreServer:
        return self.start() if self._thread is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- binding ---------------------------------------------------------------------

    def _bind(self) -> list[socket.socket]:
        if self._listen_fd is not None:
            sock = socket.socket(fileno=self._listen_fd)
            bound = sock.getsockname()[1]
            if self._requested_port not in (0, bound):
                sock.detach()
                raise StoreBindError(
                    f"listen fd {self._listen_fd} is bound to port {bound}, expected port "
                    f"{self._requested_port}",
                    host=self.host,
                    port=self._requested_port,
                    errno=None,
                )
            sock.listen(BACKLOG)
            return [sock]
        plan, may_fall_back = bind_plan(self.host)
        for _ in range(8):  # port 0 over several families: retry if a later family collides
            try:
                return self._bind_all(plan, may_fall_back)
            except _PortRace:
                continue
        return self._bind_all(plan, may_fall_back)

    def _bind_all(
        self, plan: list[tuple[socket.AddressFamily, str]], may_fall_back: bool
    ) -> list[socket.socket]:
        port = self._requested_port
        bound: list[socket.socket] = []
        try:
            for i, (family, address) in enumerate(plan):
                try:
                    sock = _listen(family, address, port)
                except OSError as exc:
                    if exc.errno == errno_mod.EADDRNOTAVAIL and may_fall_back:
                        wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"
                        emit(
                            _log,
                            "bind_fallback",
                            logging.WARNING,
                            host=self.host,
                            reason=str(exc),
                            addresses=[wildcard],
                        )
                        sock = self._listen_or_raise(family, wildcard, port)
                    elif exc.errno == errno_mod.EADDRNOTAVAIL and address == "::1":
                        continue  # IPv6 loopback not configured: IPv4 loopback serves
                    elif i > 0 and self._requested_port == 0 and exc.errno == errno_mod.EADDRINUSE:
                        raise _PortRace from exc
                    else:
                        raise self._bind_error(address, port, exc) from exc
                bound.append(sock)
                port = sock.getsockname()[1]
        except BaseException:
            for sock in bound:
                sock.close()
            raise
        return bound

    def _listen_or_raise(
        self, family: socket.AddressFamily, address: str, port: int
    ) -> socket.socket:
        try:
            return _listen(family, address, port)
        except OSError as exc:
            raise self._bind_error(address, port, exc) from exc

    def _bind_error(self, address: str, port: int, exc: OSError) -> StoreBindError:
        code = exc.errno
        name = errno_mod.errorcode.get(code or 0, "?")
        why = _EXPLAIN.get(code or 0, f"could not be bound: {exc.strerror or exc}")
        shown = f"[{address}]" if ":" in address else (address or "0.0.0.0")
        return StoreBindError(
            f"port {port} on {shown} {why} (errno {code} {name}; endpoint host "
            f"{self.host!r}). Pick another port, or stop the process holding this one.",
            host=self.host,
            port=port,
            errno=code,
        )


class _PortRace(Exception):
    """An ephemeral port chosen on one family is taken on another: choose again."""


def _listen(family: socket.AddressFamily, address: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and address == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((address, port))
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


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


class _Connection(asyncio.Protocol):
    """One client connection: bytes in, decoded requests to the KV, replies out.

    Memory per connection stays bounded: requests are applied in small batches and not at
    all while the peer leaves more than ``_HIGH_WATER`` bytes of replies unread (reading
    pauses too), and a peer may send at most ``_MAX_HELD_BYTES`` while it waits.
    """

    def __init__(self, server: StoreServer) -> None:
        self.server = server
        self.decoder = _decoder.RequestDecoder(server.limits)
        self.transport: asyncio.Transport
        self.pending: deque[_wire.Request] = deque()
        self.held_bytes = 0
        self.dropped = False

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

    def data_received(self, data: bytes) -> None:
        if self.server.kv.is_waiting(self):
            self.held_bytes += len(data)
            if self.held_bytes > _MAX_HELD_BYTES:
                self.server.kv.close(self)
                self.drop(
                    StoreProtocolError(
                        f"sent more than {_MAX_HELD_BYTES} bytes while waiting for keys"
                    )
                )
                return
        else:
            self.held_bytes = 0
        self.pending.extend(self.decoder.feed(data))
        self._pump()

    def _pump(self) -> None:
        kv = self.server.kv
        now = asyncio.get_running_loop().time()
        pending = self.pending
        while pending and not self.dropped:
            if self.transport.get_write_buffer_size() > _HIGH_WATER:
                self.transport.pause_reading()  # resume_writing pumps again
                return
            batch = [pending.popleft() for _ in range(min(_BATCH, len(pending)))]
            outcome = kv.feed(self, batch, now)
            for conn, payload in outcome.replies:
                assert isinstance(conn, _Connection)
                conn.write(payload)
            for conn, error in outcome.dropped.items():
                assert isinstance(conn, _Connection)
                conn.drop(error)
        if self.decoder.error is not None and not self.dropped:
            kv.close(self)
            self.drop(self.decoder.error)

    def write(self, payload: bytes) -> None:
        if payload and not self.transport.is_closing():
            self.transport.write(payload)

    def drop(self, error: StoreProtocolError) -> None:
        self.dropped = True
        self.pending.clear()
        peer = self.transport.get_extra_info("peername")
        _log.warning("dropping store connection from %s: %s", peer, error)
        self.transport.close()

    def pause_writing(self) -> None:
        # The peer is not reading its replies: stop reading its requests (bounded memory).
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.dropped:
            self.transport.resume_reading()
            self._pump()

    def connection_lost(self, exc: Exception | None) -> None:
        self.dropped = True
        self.pending.clear()
        self.server._conns.discard(self)
        self.server.kv.close(self)
