"""A scripted store peer: a fake TCPStore server on 127.0.0.1 that the test drives.

It accepts one connection and answers the handshake itself (as an rdzv server when
``pipelined``, else as torch's); every other decoded request is handed to the test through
``requests``. The test then scripts what the "store" does: send bytes, stop reading (a
frozen host), close the connection cleanly (EOF) or reset it (RST). All socket I/O happens
on the peer's own thread; the test's commands are run there and waited for.

Answers that must come promptly (the client gives a store only a short grace after its
deadline) are scripted ahead with :meth:`ScriptedPeer.answer` / :meth:`hang_up_on`: the
peer's thread then acts the moment the request arrives, however loaded the machine is.
"""

from __future__ import annotations

import contextlib
import queue
import select
import socket
import struct
import threading
from collections.abc import Callable

from rdzv.store.state._kv import PROBE_KEY
from rdzv.store.wire import _decoder, _wire

_Action = Callable[[socket.socket], bool]  # True: the connection is gone, stop serving


class ScriptedPeer:
    """A fake store for one client connection.

    Args:
        pipelined: answer the handshake probe as an rdzv server (True) or as torch's.
        freeze_after_handshake: stop reading the connection once the handshake is answered
            (the host looks alive to the kernel but its process answers nothing).
    """

    def __init__(self, pipelined: bool, *, freeze_after_handshake: bool = False) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        if freeze_after_handshake:  # small buffers: a frozen peer fills up fast
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.port: int = self.listener.getsockname()[1]
        self.pipelined = pipelined
        self.requests: queue.Queue[_wire.Request] = queue.Queue()
        self.handshaken = threading.Event()
        self._freeze = freeze_after_handshake
        self._reading = True
        self._actions: queue.Queue[tuple[_Action, threading.Event]] = queue.Queue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._lock = threading.Lock()
        self._stopped = False
        self._scripted: dict[type[_wire.Request], list[_Action]] = {}
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    # --- the peer's thread ------------------------------------------------------------------

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            ready, _, _ = select.select([self.listener, self._wake_r], [], [])
            if self.listener in ready:
                conn, _ = self.listener.accept()
                with conn:
                    self._loop(conn)
        with self._lock:  # no command is queued after this
            self._stopped = True
        self._run_actions(None)  # release anyone still waiting for a command

    def _loop(self, conn: socket.socket) -> None:
        decoder = _decoder.RequestDecoder()
        while True:
            watch = [self._wake_r, conn] if self._reading else [self._wake_r]
            ready, _, _ = select.select(watch, [], [])
            if self._wake_r in ready and self._run_actions(conn):
                return
            if conn in ready:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                try:
                    for req in decoder.feed(chunk):
                        self._handle(conn, req)
                except _HungUp:
                    return

    def _run_actions(self, conn: socket.socket | None) -> bool:
        with contextlib.suppress(OSError):
            self._wake_r.recv(4096)
        gone = False
        while True:
            try:
                action, done = self._actions.get_nowait()
            except queue.Empty:
                return gone
            try:
                if conn is not None and not gone:
                    gone = action(conn)
            finally:
                done.set()

    def _handle(self, conn: socket.socket, req: _wire.Request) -> None:
        if isinstance(req, _wire.Ping):
            conn.sendall(_wire.encode_u32(req.nonce))
        elif isinstance(req, _wire.Check) and req.keys == (PROBE_KEY,):
            if self._freeze:  # before the answer: the client may send at once
                self._reading = False
            self.handshaken.set()
            conn.sendall(_wire.encode_u8(_wire.READY if self.pipelined else _wire.NOT_READY))
        elif not isinstance(req, _wire.Validate):
            self.requests.put(req)
            with self._lock:
                pending = self._scripted.get(type(req), [])
                action = pending.pop(0) if pending else None
            if action is not None and action(conn):
                raise _HungUp

    def _script(self, kind: type[_wire.Request], action: _Action) -> None:
        with self._lock:
            self._scripted.setdefault(kind, []).append(action)

    # --- the test's commands ----------------------------------------------------------------

    def _do(self, action: _Action) -> bool:
        """Run ``action`` on the peer's thread; False if the peer had already stopped."""
        done = threading.Event()
        with self._lock:
            if self._stopped:
                return False
            self._actions.put((action, done))
        self._wake_w.send(b"!")
        assert done.wait(10), "the scripted peer did not run the command"
        return True

    def expect(self, kind: type[_wire.Request]) -> None:
        """Wait for the next request from the client and check its type."""
        req = self.requests.get(timeout=10)
        assert isinstance(req, kind), req

    def send(self, data: bytes) -> None:
        """Send ``data`` to the client."""
        assert self._do(_sender(data)), "the connection to the client is already gone"

    def answer(self, kind: type[_wire.Request], data: bytes) -> None:
        """When the next request of type ``kind`` arrives, send ``data`` at once."""
        self._script(kind, _sender(data))

    def hang_up(self) -> None:
        """Close the connection cleanly: the client sees EOF."""
        assert self._do(_hang_up), "the connection to the client is already gone"

    def hang_up_on(self, kind: type[_wire.Request]) -> None:
        """When the next request of type ``kind`` arrives, close the connection cleanly."""
        self._script(kind, _hang_up)

    def reset(self) -> None:
        """Abort the connection: the client sees a reset (RST), as from a middlebox."""

        def action(conn: socket.socket) -> bool:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            return True

        assert self._do(action), "the connection to the client is already gone"

    def close(self) -> None:
        """Stop the peer and release every socket (idempotent)."""
        self._do(lambda conn: True)
        self._thread.join(10)
        for sock in (self.listener, self._wake_r, self._wake_w):
            sock.close()


class _HungUp(Exception):
    """A scripted action ended the connection while requests were being handled."""


def _sender(data: bytes) -> _Action:
    def action(conn: socket.socket) -> bool:
        conn.sendall(data)
        return False

    return action


def _hang_up(conn: socket.socket) -> bool:
    conn.shutdown(socket.SHUT_RDWR)
    return True
