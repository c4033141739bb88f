"""Listen and dial addresses in Toxiproxy's ``host:port`` form, and listening sockets.

Error messages imitate Go's ``net`` package, as Toxiproxy returns them verbatim (e.g.
``listen tcp 127.0.0.1:3310: bind: address already in use``).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import socket
import sys

from harness.errors import ProxyStartError

__all__ = ["bind_listen", "join_address", "resolve_listen", "split_address"]


def split_address(address: str, what: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) as ``(host, port)``; ``what`` prefixes errors.

    Raises:
        ProxyStartError: no port, or a port that is not a number in 0..65535.
    """
    host, colon, port = address.rpartition(":")
    if not colon:
        raise ProxyStartError(f"{what}: address {address}: missing port in address")
    if not port.isdigit() or int(port) > 65535:
        raise ProxyStartError(f"{what}: address {address}: invalid port")
    return host.removeprefix("[").removesuffix("]"), int(port)


def join_address(host: str, port: int) -> str:
    """``(host, port)`` as ``"host:port"``, bracketing IPv6 hosts like Go does."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def resolve_listen(listen: str) -> tuple[socket.AddressFamily, tuple[str, int]]:
    """Resolve a listen address (IPv4 preferred, as Go does for ``localhost``).

    Raises:
        ProxyStartError: malformed address or a host name that does not resolve.
    """
    host, port = split_address(listen, "listen tcp")
    numeric = _numeric(host)
    if numeric is not None:  # no lookup to do: no trip to the loop's resolver thread
        return numeric[0], (numeric[1], port)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise ProxyStartError(f"listen tcp: lookup {host}: {exc.strerror or exc}") from exc
    family, _, _, _, sockaddr = next((i for i in infos if i[0] == socket.AF_INET), infos[0])
    return family, (str(sockaddr[0]), int(sockaddr[1]))


def _numeric(host: str) -> tuple[socket.AddressFamily, str] | None:
    """``host`` as an IP address in the text getaddrinfo would give back, with its family;
    None when it is a name (or empty, or scoped) and must be looked up. A link is made per
    node: at 10,240 nodes a lookup each, on the loop's resolver thread, cost a thread
    switch per link, seconds on a loaded machine."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return family, socket.inet_ntop(family, socket.inet_pton(family, host))
        except (OSError, ValueError):
            continue
    return None


async def bind_listen(listen: str) -> socket.socket:
    """A non-blocking listening socket for a ``host:port`` string (port 0: any free port).

    Raises:
        ProxyStartError: the address is malformed, does not resolve, or cannot be bound;
            the message reads like Toxiproxy's (``listen tcp ...: bind: ...``).
    """
    return _listen_socket(*await resolve_listen(listen))


def _reusable(family: socket.AddressFamily) -> socket.socket:
    # SO_REUSEADDR only: a port left in TIME_WAIT by dropped connections can be bound again,
    # while a second listener on the same port (SO_REUSEPORT) is refused, as Toxiproxy does.
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def _disconnect(sock: socket.socket) -> bool:
    """``connect(AF_UNSPEC)``: Linux turns a listening TCP socket back into a closed one
    (pending connections are reset) while it stays bound. False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    unspec = (ctypes.c_ubyte * 16)()  # a sockaddr whose family is AF_UNSPEC (0)
    return bool(_libc().connect(sock.fileno(), unspec, ctypes.sizeof(unspec)) == 0)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def hold_port(listener: socket.socket) -> socket.socket | None:
    """Stop ``listener`` listening but keep its port: connections to the port are refused,
    and nothing else can bind it (an outgoing connection's automatic port included) until
    the socket listens again (:func:`relisten`) or is closed. Returns the same socket, or
    None where the platform cannot do this (``listener`` is then closed, the port free).
    """
    address = listener.getsockname()
    try:
        if not _disconnect(listener):
            listener.close()
            return None
        try:  # a port the kernel chose (listen on port 0) is given back: take it again
            listener.bind(address)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: still bound (the port was explicit)
                raise
        # no SO_REUSEADDR while held: a bound socket that does not listen blocks others only
        # if it does not offer to share (Linux lets two reusable non-listeners bind a port)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    except OSError:
        listener.close()
        return None
    return listener


def relisten(sock: socket.socket) -> socket.socket:
    """Make a socket kept by :func:`hold_port` a non-blocking listener again.

    Raises:
        OSError: the socket cannot listen again.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.listen(4096)
    sock.setblocking(False)
    return sock


def _listen_socket(family: socket.AddressFamily, address: tuple[str, int]) -> socket.socket:
    # Port 0: bound first, made reusable after. Linux's search for a free port for a
    # reusable socket scans the ports in use: ~1.3 ms a bind once 7,000 were bound here
    # (12,000 links: 6.3 s), against 6 us for a socket that does not offer to share. Made
    # reusable before it listens, the listener (and the connections it accepts) end as if
    # it had been from the start: a held port can be bound again past TIME_WAIT.
    explicit = address[1] != 0
    sock = _reusable(family) if explicit else socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind(address)
        if not explicit:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.listen(4096)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        reason = (exc.strerror or str(exc))[:1].lower() + (exc.strerror or str(exc))[1:]
        raise ProxyStartError(f"listen tcp {join_address(*address)}: bind: {reason}") from exc
    return sock
