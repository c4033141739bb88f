"""One connection of the store server: bytes in, decoded requests to the KV, replies out.

Runs on the server's loop thread (:mod:`rdzv.store.server._loop`), on a non-blocking socket:

* **Reading.** One ``recv`` per readiness event. A client's first read that starts with a
  whole VALIDATE (torch's magic) is validated here. The leading requests of a read that the
  fast path (:mod:`rdzv.store.state._fast`) can finish are served from the received bytes in
  place; the rest, and every read while a request is incomplete, queued or waiting, goes
  through the decoder and ``WatchingKV``.
* **Writing.** A read's replies go out in one ``send``: those of the fast path ride on the
  general path's first reply to the same read (``corked``). Only what the kernel did not
  take is kept, and the socket is watched for writability only while something is kept.
* **Bounded memory.** Requests are applied in small batches, and not at all while the peer
  leaves more than ``_HIGH_WATER`` bytes of replies unread; reading pauses too, and resumes
  once the peer has read all but ``_LOW_WATER`` of them. A peer sends at most
  :func:`~rdzv.store.server._bounds.may_hold` bytes while it waits. ``partial``, the size of
  the incomplete request the decoder holds once the first request completed, is what the
  server's :class:`~rdzv.store.server._bounds.Bounds` sums and bounds (see there).
* **Closing.** A dropped connection stops reading at once and is closed in the next loop
  iteration (never inside another connection's batch); then the KV forgets its session and
  the writer watches hear of the close (:meth:`Connection.lost`), and every buffer it held
  is released. A connection that spoke the protocol and is cut by a bound
  (:meth:`Connection.cut`) is logged in full, with the bound, by the server.
"""

from __future__ import annotations

import contextlib
import socket
from collections import deque
from collections.abc import Callable
from time import monotonic

from rdzv.errors import StoreProtocolError
from rdzv.store.server._bounds import HELD_BOUND, MAX_HELD_BYTES, OVERSENT_BOUND, may_hold
from rdzv.store.server._droplog import INCOMPLETE, REJECTED, UNDECODABLE
from rdzv.store.server._loop import READ, WRITE, EventLoop
from rdzv.store.state._kv import HeldTooMany
from rdzv.store.wire import _decoder, _wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.store.server import StoreServer

__all__ = ["Connection"]

_HIGH_WATER: Final = 4 * 1024 * 1024
_LOW_WATER: Final = _HIGH_WATER // 4
_BATCH: Final = 16
_VALIDATE: Final = _wire.encode_request(_wire.Validate())  # with torch's magic
_VALIDATE_SIZE: Final = len(_VALIDATE)


class Connection:
    """One accepted client connection (see the module doc). ``on_open(conn)`` runs once it is
    set up, before its first event, and ``on_close(conn)`` once it is lost: the server keeps
    the set of its connections with them."""

    __slots__ = (
        "bounds",
        "closed",
        "closing",
        "corked",
        "decoded_any",
        "decoder",
        "dropped",
        "events",
        "held_bytes",
        "loop",
        "on_close",
        "out",
        "partial",
        "peername",
        "pending",
        "reading_paused",
        "serve_fast",
        "server",
        "session",
        "sock",
        "starving",
    )

    def __init__(
        self,
        server: StoreServer,
        loop: EventLoop,
        sock: socket.socket,
        peername: object,
        *,
        on_open: Callable[[Connection], None],
        on_close: Callable[[Connection], None],
        tcp: bool | None = None,
    ) -> None:
        self.server = server
        self.loop = loop
        self.sock = sock
        self.peername = peername
        self.decoder = _decoder.RequestDecoder(server.limits)
        self.pending: deque[_wire.Request] = deque()
        self.out = bytearray()  # replies the kernel did not take yet
        self.corked = b""  # the fast path's replies, sent with the general path's first
        self.held_bytes = 0
        self.dropped = False  # no request of this connection is served any more
        self.closing = False  # reading stopped, closed in the next iteration
        self.closed = False
        self.decoded_any = False
        self.reading_paused = False  # the peer leaves its replies unread
        self.starving = False  # the server's buffer budget is spent (rdzv.store.server._bounds)
        self.partial = 0  # bytes of the incomplete request held, once greeted
        sock.setblocking(False)
        if tcp is None:  # the listener's family says it, without a lookup per connection
            tcp = sock.family in (socket.AF_INET, socket.AF_INET6)
        if tcp:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.on_close = on_close
        on_open(self)
        self.session = server.kv.open(self)
        self.serve_fast = server.serve_fast
        self.bounds = server.bounds
        loop.register(sock, READ, self.on_events)
        self.events = READ
        server.bounds.accepted(self)  # the first request is due

    # --- events -----------------------------------------------------------------------

    def on_events(self, mask: int) -> None:
        """The loop's handler: the socket is readable and/or writable.

        A read's leading frequent requests are served on the fast path, inline here (this
        runs once per read); the rest, if any, goes to :meth:`data_received`.
        """
        if mask & WRITE and self.out:
            self._flush()
        if not mask & READ or self.closing or self.reading_paused:
            return
        try:
            data = self.sock.recv(self.bounds.read_size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # reset by the peer
            self.lost()
            return
        if not data:  # the peer closed
            self.lost()
            return
        session = self.session
        if not self.decoded_any and data.startswith(_VALIDATE) and not self.decoder.buffered:
            # A client's first read, whole VALIDATE first (the fast path serves what follows)
            self.server.kv.validate(self)
            self.decoded_any = True
            self.bounds.greeted(self)
            data = data[len(_VALIDATE) :]
            if not data:
                return
        if (
            session.waiting is None
            and session.validated
            and not self.partial  # nothing buffered in the decoder
            and not (self.pending or self.out or self.decoder.error)
        ):
            used, replies = self.serve_fast(self, data)
            if used:
                self.decoded_any = True
                self.held_bytes = 0
                if used < len(data):
                    # The rest goes to the general path: its first reply to this peer
                    # carries these (one send, one wake-up of the peer, not two).
                    self.corked = replies
                    self.data_received(data[used:])
                    if self.corked:  # the general path had nothing to say to this peer
                        self.write(b"")
                    return
                self.write(replies)
                return
        self.data_received(data)

    def data_received(self, data: bytes) -> None:
        """The general path: decode ``data`` and apply the requests it completes through
        the KV."""
        if self.server.kv.is_waiting(self):
            self.held_bytes += len(data)
            if self.held_bytes > MAX_HELD_BYTES and self.held_bytes > (limit := self._may_hold()):
                self.cut(
                    OVERSENT_BOUND,
                    f"it sent {self.held_bytes} bytes while waiting for keys, more than "
                    f"{limit} (1 MiB and as much again as its wait's keys)",
                )
                return
        else:
            self.held_bytes = 0
        decoder = self.decoder
        requests = decoder.feed(data)
        after = decoder.buffered
        if not self.decoded_any:
            if requests:
                self.decoded_any = True
                self.bounds.greeted(self)
            elif after >= _VALIDATE_SIZE:  # whatever it is, it is not VALIDATE
                self.server.kv.close(self)
                self.drop(
                    REJECTED,
                    StoreProtocolError(
                        f"its first request (opcode {decoder.first_byte}, {after} bytes so "
                        f"far) is not VALIDATE; the peer does not speak the TCPStore protocol"
                    ),
                )
                return
        if self.decoded_any and (after != self.partial or (requests and after)):
            before, self.partial = self.partial, after
            self.bounds.buffered(self, before, after, bool(requests))
        if not requests:
            if decoder.error is not None:
                self._pump()
            return
        if self.pending or len(requests) > _BATCH or len(self.out) > _HIGH_WATER:
            self.pending.extend(requests)
            self._pump()
            return
        self._apply(requests)  # the common case: a request or two, nothing queued
        if decoder.error is not None and not self.dropped:
            self._pump()

    # --- the bounds (rdzv.store.server._bounds) ----------------------------------------------

    def _may_hold(self) -> int:
        waiting = self.session.waiting
        return may_hold(waiting.keys if waiting is not None else ())

    def expire(self, bound: float) -> None:
        """The handshake deadline passed before the first request completed: drop."""
        if self.dropped:
            return
        received = self.decoder.buffered
        if received:
            what = (
                f"sent only {received} bytes of its first request within {bound:g} s of connecting"
            )
        else:
            what = f"sent no request within {bound:g} s of connecting"
        self.server.kv.close(self)
        self.drop(INCOMPLETE, StoreProtocolError(what))

    def cut(self, bound: str, detail: str) -> None:
        """Close this connection, which spoke the protocol, because it exceeded ``bound``;
        the server logs it in full, naming the peer, the bound and ``detail``."""
        if self.dropped:
            return
        server = self.server
        server.kv.close(self)
        self.bounds.forget(self, self.partial)
        self.partial = 0
        self.pending.clear()
        server.cut(self.peername, bound, detail)
        self._close_soon()

    def starve(self, starving: bool) -> None:
        """Stop reading (the server's buffer budget is spent) or read again."""
        self.starving = starving
        self._update_events()

    # --- requests and replies ---------------------------------------------------------

    def _pump(self) -> None:
        """Apply the queued requests in batches while the peer reads its replies."""
        pending = self.pending
        while pending and not self.dropped:
            if len(self.out) > _HIGH_WATER:
                self._pause_reading()  # draining the replies pumps again
                return
            if len(pending) <= _BATCH:
                batch = list(pending)
                pending.clear()
            else:
                batch = [pending.popleft() for _ in range(_BATCH)]
            self._apply(batch)
        if self.decoder.error is not None and not self.dropped:
            self.server.kv.close(self)
            self.drop(UNDECODABLE, self.decoder.error)

    def _apply(self, batch: list[_wire.Request]) -> None:
        """Apply ``batch`` to the KV; send the replies (to waiters woken too); drop whom
        the KV rejected."""
        outcome = self.server.kv.feed(self, batch, monotonic())
        for conn, chunks in outcome.parts.items():  # Outcome.replies, without a list
            assert isinstance(conn, Connection)
            conn.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if outcome.dropped:
            for conn, error in outcome.dropped.items():
                assert isinstance(conn, Connection)
                if isinstance(error, HeldTooMany):
                    conn.cut(HELD_BOUND, str(error))
                else:
                    conn.drop(REJECTED, error)

    def write(self, payload: bytes) -> None:
        """Send ``payload`` now, keeping what the kernel does not take (and then watching
        the socket for writing)."""
        if self.corked:  # the fast path's replies to the same read go first
            payload, self.corked = self.corked + payload, b""
        if not payload or self.closing:
            return
        out = self.out
        if out:
            out += payload
        else:
            try:
                sent = self.sock.send(payload)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # reset: closed in the next iteration, as a drop is
                self._close_soon()
                return
            if sent == len(payload):
                return
            out += memoryview(payload)[sent:]
            self._update_events()
        if len(out) > _HIGH_WATER and not self.reading_paused:
            self._pause_reading()  # the peer is not reading its replies

    def _flush(self) -> None:
        out = self.out
        try:
            sent = self.sock.send(out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.lost()
            return
        del out[:sent]
        if self.reading_paused and len(out) <= _LOW_WATER and not self.closing:
            self.reading_paused = False
            self._update_events()
            self._pump()
        elif not out:
            self._update_events()

    def _pause_reading(self) -> None:
        self.reading_paused = True
        self._update_events()

    def _update_events(self) -> None:
        """Watch the socket for what is wanted now: reading unless paused or closing,
        writing while replies are kept."""
        if self.closed:
            return
        reading = not (self.reading_paused or self.starving or self.closing)
        want = (READ if reading else 0) | (WRITE if self.out else 0)
        if want == self.events:
            return
        loop = self.loop
        if not self.events:
            loop.register(self.sock, want, self.on_events)
        elif not want:
            loop.unregister(self.sock)
        else:
            loop.modify(self.sock, want)
        self.events = want

    # --- closing ----------------------------------------------------------------------

    def drop(self, reason: str, error: StoreProtocolError) -> None:
        """Log ``error`` and close the connection in the next iteration."""
        self.dropped = True
        self.pending.clear()
        self.server.dropped(self.peername, reason, error)
        self._close_soon()

    def _close_soon(self) -> None:
        self.dropped = True
        if self.corked:  # replies to the requests before the cause: sent first
            self.write(b"")
        if not self.closing:
            self.closing = True
            self._update_events()
            self.loop.call_soon(self.lost)

    def lost(self) -> None:
        """Close the socket (sending what is kept if the kernel takes it at once), forget
        the session, and tell the writer watches (not when the server is closing).
        Idempotent."""
        if self.closed:
            return
        self.closing = self.closed = self.dropped = True
        self.pending.clear()
        if self.out:
            with contextlib.suppress(OSError):
                self.sock.send(self.out)
            self.out.clear()
        if self.events:
            with contextlib.suppress(KeyError, OSError):
                self.loop.unregister(self.sock)
            self.events = 0
        self.sock.close()
        self.decoder.discard()
        server = self.server
        self.bounds.forget(self, self.partial)
        self.partial = 0
        self.on_close(self)
        server.kv.close(self)
        server.kv.writer_closed(self, notify=not server.closing)
