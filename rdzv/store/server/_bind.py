"""Where the store server listens: the bind rules, and binding with errors that say why.

Bind rules for an endpoint host:

* ``""``, ``"::"`` or ``"*"``: the dual-stack wildcard (IPv6 ``::`` accepting IPv4 too), or
  ``0.0.0.0`` where IPv6 is unavailable; ``"0.0.0.0"``: the IPv4 wildcard.
* A loopback endpoint (``localhost``, ``127.0.0.0/8``, ``::1``) listens on loopback only,
  never on all interfaces.
* Any other IP literal binds that address; if it is not an address of this machine the
  server falls back to that family's wildcard and logs why (the bind never fails for it).
* Any other host name binds the dual-stack wildcard, as torch does: a name may resolve to
  different addresses here and on the other nodes (the ``127.0.1.1`` trap of Debian hosts).
"""

from __future__ import annotations

import errno as errno_mod
import socket

from rdzv.errors import StoreBindError
from rdzv.events import WARNING, emit, get_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["BACKLOG", "bind", "bind_plan", "listen_ahead"]

_log = get_logger("rdzv.server")

BACKLOG: Final = 4096
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
    import ipaddress  # lazy: the hosting node only, as it binds

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


def listen_ahead(host: str, port: int) -> int | None:
    """The descriptor of a socket already listening where a server for ``host:port`` will,
    for that server to adopt (``StoreServer(listen_fd=...)``, ``TCPStore(...,
    master_listen_fd=...)``): made before the server is imported, so that connections wait
    in its backlog meanwhile instead of being refused. None when the server should bind
    itself: ``host`` has several listen addresses (``localhost``: IPv4 and IPv6), or
    ``host:port`` cannot be bound now (a server of this process already listens there, which
    a multi-tenant master shares, or a real bind error, which the server then reports)."""
    if len(bind_plan(host)[0]) != 1:
        return None
    try:
        (sock,) = bind(host, port)
    except (StoreBindError, ValueError):
        return None
    return sock.detach()


def bind(host: str, port: int, listen_fd: int | None = None) -> list[socket.socket]:
    """Bind and listen for endpoint host ``host`` (see the module doc), non-blocking.

    Args:
        host: the endpoint host.
        port: the port; 0 picks one ephemeral port shared by every address bound.
        listen_fd: take over this already bound socket instead.

    Returns:
        The listening sockets (one per address family bound).

    Raises:
        StoreBindError: an address could not be bound; the message names the address,
            port and errno and says why in plain words.
    """
    return _Binder(host, port, listen_fd).bind()


class _Binder:
    def __init__(self, host: str, port: int, listen_fd: int | None) -> None:
        self.host = host
        self._requested_port = port
        self._listen_fd = listen_fd

    def bind(self) -> list[socket.socket]:
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
                            WARNING,
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
