"""Loopback peers and socket helpers shared by the fault-proxy tests."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from dataclasses import dataclass, field


@dataclass
class Received:
    """What one upstream connection received, and whether it saw the client's end."""

    data: bytearray = field(default_factory=bytearray)
    ended: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


class UpstreamServer(socketserver.ThreadingTCPServer):
    """A loopback TCP server that records what it receives and optionally echoes it."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, echo: bool = True, banner: bytes = b"") -> None:
        self.echo, self.banner = echo, banner
        self.connections: list[Received] = []
        self.accepted = threading.Semaphore(0)
        self.sockets: list[socket.socket] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    def close_all(self) -> None:
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(socketserver.BaseRequestHandler):
    server: UpstreamServer

    def handle(self) -> None:
        record = Received()
        self.server.connections.append(record)
        self.server.sockets.append(self.request)
        self.server.accepted.release()
        try:
            self.request.sendall(self.server.banner)
            while chunk := self.request.recv(65536):
                record.data += chunk
                if self.server.echo:
                    self.request.sendall(chunk)
        except OSError as exc:
            record.error = exc
        finally:
            record.ended.set()


def connect(address: tuple[str, int], timeout: float = 10.0) -> socket.socket:
    """A client socket to ``address`` with a read timeout, so no test can hang forever."""
    sock = socket.create_connection(address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes, or fewer if the peer ends first."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def recv_until_closed(sock: socket.socket) -> bytes:
    """Read until EOF (raises what the socket raises, e.g. ConnectionResetError)."""
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def is_closed(sock: socket.socket) -> bool:
    """True when the peer has closed the socket, whether with a FIN (EOF) or a RST."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
