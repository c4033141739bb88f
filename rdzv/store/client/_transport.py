"""One client connection to a store: deadline-bounded sends and reads of framed replies.

Everything blocking here takes an absolute ``time.monotonic()`` deadline (``None`` = none).

Invariants of :class:`Channel`:

1. A connection that failed once (EOF, reset, an I/O error, a reply that broke the
   protocol, a deadline that left a request or reply half done) is closed at once and
   remembers why; every later ``send``/``read`` raises :class:`StoreClosedError` naming that
   reason, and nothing is sent.
2. Before every send the socket is checked without blocking for an EOF or a reset that
   already arrived, so a request without a reply (SET) is never reported done on a
   connection the peer has already closed. Bytes waiting to be read are not an error.
3. Messages state what was observed (``closed the connection (EOF)``, ``connection reset
   by peer``, the OS error) and only causes consistent with it.
"""

from __future__ import annotations

import errno
import functools
import math
import select
import socket
import time
from collections.abc import Callable

from rdzv.errors import StoreClosedError, StoreProtocolError, StoreTimeoutError
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import format_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Literal, TypeVar

    T = TypeVar("T")
    #: What ended a connection, when the peer did.
    Seen = Literal["eof", "reset", "broken", "error", "shutdown"]

__all__ = ["Channel", "Expired", "closed_error"]


_RECV: Final = 65536
_BIG_RECV: Final = 1 << 20


class Expired(Exception):
    """A read passed its deadline (the caller turns this into a named timeout)."""


#: Causes consistent with each observation (and only those).
_CAUSES: Final[dict[Seen, str]] = {  # an OS error ("error") speaks for itself
    "eof": "the store host shut down or exited, gave up on this client, or rejected a request",
    "reset": (
        "the store host's process ended abruptly or closed the connection with requests "
        "unread, or something on the network path (a proxy, a firewall) reset it"
    ),
    "broken": "the store host or something on the network path had closed or reset it",
}


class Channel:
    """One connection: deadline-bounded sends and reads of framed replies."""

    def __init__(self, sock: socket.socket, endpoint: str, limits: _wire.Limits) -> None:
        self.sock = sock
        self.endpoint = endpoint
        self.limits = limits
        self._buf = bytearray()
        self._pos = 0
        # The socket stays in blocking mode; every wait is a poll bounded by the deadline,
        # and every recv/send is non-blocking (fewer system calls than socket timeouts).
        # The polls are made when first needed (an express may use the socket before).
        self.closed_because: str | None = None
        self.seen: Seen | None = None  # what ended the connection, when the peer did

    @functools.cached_property
    def _readable(self) -> select.poll:
        return self._poll(select.POLLIN)

    @functools.cached_property
    def _writable(self) -> select.poll:
        return self._poll(select.POLLOUT)

    def _poll(self, events: int) -> select.poll:
        self.sock.setblocking(True)  # (the mode the first attempt may have left unset)
        poller = select.poll()
        poller.register(self.sock, events)
        return poller

    @property
    def closed(self) -> bool:
        """True once the connection is unusable (invariant 1)."""
        return self.closed_because is not None

    def send(self, data: bytes, op: str, deadline: float | None) -> None:
        """Send ``data`` whole, after checking that the peer has not closed (invariant 2).

        Raises:
            Expired: the deadline passed with ``data`` not (entirely) sent; the connection
                is closed (a half-sent request cannot be taken back).
            StoreClosedError: the connection is known to be dead, or was found dead now;
                ``data`` was not (entirely) sent.
        """
        if self.closed_because is not None:
            self._ensure_open(op)
        self._probe(op)
        try:
            try:
                sent = self.sock.send(data, socket.MSG_DONTWAIT)
            except BlockingIOError:
                sent = 0
            while sent < len(data):
                if not _ready(self._writable, deadline):
                    self.close(f"sending {op} did not finish before the deadline")
                    raise Expired
                sent = self._send_now(data, sent)
        except OSError as exc:
            raise self.lost_in(exc, f"while sending {op}") from exc

    def submit(self, data: bytes, op: str, deadline: float | None, seconds: float | None) -> None:
        """:meth:`send`, with a deadline that passes reported as a timeout of ``seconds``.

        Raises:
            StoreTimeoutError: the store stopped reading before ``data`` was sent whole
                (the connection is closed).
            StoreClosedError: as :meth:`send`.
        """
        try:
            self.send(data, op, deadline)
        except Expired:
            raise self.send_timeout(op, seconds) from None

    def send_timeout(self, op: str, seconds: float | None) -> StoreTimeoutError:
        """The timeout of a send of ``op`` that did not finish within ``seconds`` (the
        connection is closed)."""
        return StoreTimeoutError(
            f"could not send {op} to the store at {self.endpoint} within "
            f"{format_ms(seconds)}: it stopped reading (its host is frozen or overloaded, "
            "or the network path stalled); the connection was closed"
        )

    def _send_now(self, data: bytes, sent: int) -> int:
        """Send what the socket takes now from ``data[sent:]``; return the new ``sent``."""
        try:
            return sent + self.sock.send(memoryview(data)[sent:], socket.MSG_DONTWAIT)
        except BlockingIOError:
            return sent

    def read(
        self,
        parse: Callable[[bytearray, int], tuple[T, int]],
        deadline: float | None,
        op: str,
    ) -> T:
        """Read one reply with ``parse``, receiving until it is complete.

        A reply that has already arrived is returned even when the deadline has passed.

        Raises:
            Expired: the deadline passed first (nothing was consumed).
            StoreClosedError: the peer closed or reset the connection, or it failed.
            StoreProtocolError: the reply exceeds the limits (the connection is closed).
        """
        buf = self._buf
        while True:
            if len(buf) == self._pos:  # nothing to parse yet
                self._recv(deadline, op)
                continue
            try:
                value, pos = parse(buf, self._pos)
            except _wire.Incomplete:
                pass
            except StoreProtocolError:
                # The reply stream can no longer be trusted: never read leftovers later.
                self.close(f"a reply to {op} broke the protocol")
                raise
            else:
                self._pos = pos
                if pos == len(self._buf):
                    self._buf.clear()
                    self._pos = 0
                return value
            self._recv(deadline, op)

    def _recv(self, deadline: float | None, op: str) -> None:
        if self.closed_because is not None:
            self._ensure_open(op)
        # Past the deadline, still take what has already arrived (a poll that does not wait).
        if not _ready(self._readable, deadline):
            raise Expired
        # 64 KiB unless a large reply is arriving: a bigger request makes the allocator map
        # and unmap memory on every call (four system calls and a page fault per reply).
        size = _BIG_RECV if len(self._buf) - self._pos >= _RECV else _RECV
        try:
            chunk = self.sock.recv(size, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return  # a spurious wake-up: the caller reads again (and checks the deadline)
        except OSError as exc:
            raise self.lost_in(exc, f"during {op}") from exc
        if not chunk:
            raise self._lost("eof", f"during {op}", None)
        self._buf += chunk

    def lost_in(self, exc: OSError, when: str) -> StoreClosedError:
        """Close the connection, which failed with ``exc`` ``when`` (``"during GET"``), and
        describe that (a broken pipe, a reset, or another OS error)."""
        if isinstance(exc, BrokenPipeError):
            return self._lost("broken", when, exc)
        if isinstance(exc, ConnectionResetError):
            return self._lost("reset", when, exc)
        return self._lost("error", when, exc)

    def _probe(self, op: str) -> None:
        """Raise if an EOF or a reset has already arrived (never blocks)."""
        if not self._readable.poll(0):
            return  # nothing arrived: as far as anyone can tell, the peer is there
        not_sent = f"before {op} was sent, so {op} was not sent"
        try:
            pending = self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except ConnectionResetError as exc:
            raise self._lost("reset", not_sent, exc) from exc
        except OSError as exc:
            raise self._lost("error", not_sent, exc) from exc
        if not pending:
            raise self._lost("eof", not_sent, None)

    def _lost(self, seen: Seen, when: str, exc: OSError | None) -> StoreClosedError:
        """Close the connection and describe what was observed ``when``."""
        ep = self.endpoint
        if seen == "eof":
            what = f"the store at {ep} closed the connection (EOF)"
        elif seen == "reset":
            what = f"connection reset by peer at {ep}"
        elif seen == "broken":
            what = f"the connection to the store at {ep} was already broken (EPIPE)"
        else:
            what = f"the connection to the store at {ep} failed ({_os_error(exc)})"
        self.seen = seen
        self.close(f"{what} {when}")
        cause = _CAUSES.get(seen)
        return closed_error(f"{what} {when}: {cause}" if cause else f"{what} {when}", seen)

    def _ensure_open(self, op: str) -> None:
        if self.closed_because is not None:
            raise closed_error(
                f"{op} was not sent: this client's connection to the store at {self.endpoint} "
                f"was closed earlier ({self.closed_because}); create a new client to reconnect",
                self.seen,
            )

    def feed(self, data: bytes) -> None:
        """Take ``data``, received from the socket by someone else, as the next bytes read."""
        self._buf += data

    def peek_sent_back(self, first: int) -> bytes:
        """What the peer sent: the 4 bytes read as ``first`` plus whatever else is buffered."""
        return (_wire.encode_u32(first) + bytes(self._buf[self._pos :]))[:64]

    def close(self, because: str = "close() was called") -> None:
        """Close the socket, remembering the first reason given (idempotent)."""
        if self.closed_because is None:
            self.closed_because = because
        self.sock.close()


def closed_error(message: str, seen: str | None) -> StoreClosedError:
    """A :class:`StoreClosedError` that carries what was observed (``seen``)."""
    error = StoreClosedError(message)
    error.seen = seen
    return error


def _ready(poller: select.poll, deadline: float | None) -> bool:
    """Poll until the socket is ready or ``deadline`` passes (a passed one: look once)."""
    if deadline is None:
        return bool(poller.poll())
    return bool(poller.poll(math.ceil(max(0.0, deadline - time.monotonic()) * 1000)))


def _os_error(exc: OSError | None) -> str:
    if exc is None:
        return "no detail"
    code = exc.errno
    name = errno.errorcode.get(code, "") if code is not None else ""
    text = exc.strerror or str(exc) or type(exc).__name__
    return f"{name}: {text}" if name else text
