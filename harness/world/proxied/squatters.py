"""Bind faults: a foreign process-like listener that holds node 0's port before it starts.

Modes (each binds port 0 and reads it back, so the port exists only while squatted):

* ``ipv4-wildcard``: listens on ``0.0.0.0`` (what a stray server usually does);
* ``ipv6-wildcard``: listens on ``::`` dual-stack (IPv4 included, as on most Linux hosts);
* ``loopback``: listens on ``127.0.0.1`` only;
* ``silent``: listens on ``127.0.0.1``, accepts and never answers (a hung process);
* ``http``: listens on ``127.0.0.1`` and answers every connection with an HTTP error, as a
  web server or metrics endpoint sitting on the port would.

Accepting squatters serve on a daemon thread; :meth:`Squatter.release` closes everything.
Each squatter counts what it did to connections (:attr:`Squatter.acted`): accepted and
held, answered with the HTTP error, or left unaccepted in the listen backlog.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from typing import Final

from harness.world.base import SQUATTER_MODES, SquatterMode

__all__ = ["SQUATTER_MODES", "Squatter", "SquatterMode"]

HTTP_REPLY: Final = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
    b"Connection: close\r\n\r\nBad Request"
)


class Squatter:
    """Holds a port in one of the :data:`SquatterMode` ways until released.

    Raises:
        ValueError: ``mode`` is not one of :data:`SQUATTER_MODES` (the caller's mistake).
        OSError: the listener could not be bound.
    """

    def __init__(self, mode: str) -> None:
        if mode not in SQUATTER_MODES:
            known = ", ".join(repr(m) for m in SQUATTER_MODES)
            raise ValueError(f"unknown squatter mode {mode!r}; the modes are {known}")
        self.mode = mode
        family, address = {
            "ipv4-wildcard": (socket.AF_INET, "0.0.0.0"),
            "ipv6-wildcard": (socket.AF_INET6, "::"),
        }.get(mode, (socket.AF_INET, "127.0.0.1"))
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_INET6:
            self._sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        self._sock.bind((address, 0))
        self._sock.listen(128)
        self.port: int = self._sock.getsockname()[1]
        self._stop_r, self._stop_w = socket.socketpair()
        self._accepted: list[socket.socket] = []
        self._held = 0
        self._answered = 0
        self._unaccepted = 0
        self._released = False
        self._thread: threading.Thread | None = None
        if mode in ("silent", "http"):
            self._thread = threading.Thread(
                target=self._serve, name=f"squatter:{self.port}", daemon=True
            )
            self._thread.start()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._stop_r, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj is self._stop_r:
                        return
                    try:
                        conn, _ = self._sock.accept()
                    except OSError:
                        return
                    if self.mode == "http":
                        with contextlib.suppress(OSError):
                            conn.sendall(HTTP_REPLY)
                        conn.close()
                        self._answered += 1
                    else:
                        self._accepted.append(conn)  # held open, never answered
                        self._held += 1

    @property
    def acted(self) -> dict[str, int]:
        """What the squatter did to connections so far (effect -> count, non-zero only).

        Connections still waiting in the listen backlog are counted on release.
        """
        counts = {
            "connections accepted and never answered": self._held,
            "connections answered with HTTP 400": self._answered,
            "connections left unaccepted in the backlog": self._unaccepted,
        }
        return {effect: n for effect, n in counts.items() if n}

    def release(self) -> None:
        """Stop squatting: close the listener and every held connection. Idempotent."""
        with contextlib.suppress(OSError):
            self._stop_w.send(b"x")
        if self._thread is not None:
            self._thread.join(5)
        if not self._released:
            self._unaccepted = self._drain_backlog()
        self._released = True
        for sock in (self._sock, self._stop_r, self._stop_w, *self._accepted):
            sock.close()
        self._accepted.clear()

    def __enter__(self) -> Squatter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _drain_backlog(self) -> int:
        """Accept (and close) what waits in the backlog of a listener that never accepts."""
        count = 0
        self._sock.setblocking(False)
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # BlockingIOError: empty; anything else: nothing more to take
                return count
            conn.close()
            count += 1
