"""A blocking WAIT on one connection, its cancellation, and the request that follows it.

The protocol (torch's, which an rdzv server also speaks): WAIT is answered with
STOP_WAITING once every key exists. At the caller's deadline the client sends CANCEL_WAIT;
the server answers WAIT_CANCELED, or, if the keys arrived in the race, has already sent
STOP_WAITING (then the reply to a pipelined follow-up request) and answers WAIT_CANCELED
after it. An rdzv server that shuts down sends waiting clients WAIT_CANCELED unprompted.

Invariants:

1. :meth:`Wait.then` returns or raises by the caller's deadline plus :data:`GRACE`
   (a ``None`` deadline waits forever, as the caller asked).
2. Afterwards the connection is either in step (no reply outstanding) or closed, with the
   reason recorded; a reply is never left to be read as the answer to a later request.
3. A timeout message names the keys and the configured timeout, and says whether the store
   answered the cancel.
4. A wait whose deadline passed is a timeout (``StoreTimeoutError``) even when the
   connection ends after it (the store host shut down, or closed the connection): the
   deadline is the cause, the close is mentioned in the message.
"""

from __future__ import annotations

import time

from rdzv.errors import StoreClosedError, StoreProtocolError, StoreTimeoutError
from rdzv.store.client._transport import Channel, Expired, closed_error
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import format_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, TypeVar

    T = TypeVar("T")

__all__ = ["GRACE", "Wait"]


GRACE: Final = 0.4
"""Seconds past a caller's deadline that a wait may still take to end: the store's answer
to CANCEL_WAIT, or the rest of a reply whose keys arrived as the deadline passed."""

_CANCEL: Final = _wire.encode_request(_wire.CancelWait())
_MULTI_GET: Final = _wire.encode_u8(_wire.Op.MULTI_GET)


class Wait:
    """WAIT for ``keys`` (shown as ``names``) on behalf of ``op`` until ``deadline``, which
    was set ``seconds`` from the start of the call (the figure messages show)."""

    __slots__ = ("channel", "deadline", "keys", "names", "op", "seconds")

    def __init__(
        self,
        channel: Channel,
        keys: tuple[bytes, ...],
        names: list[str],
        op: str,
        seconds: float | None,
        deadline: float | None,
    ) -> None:
        self.channel = channel
        self.keys = keys
        self.names = names
        self.op = op
        self.seconds = seconds
        self.deadline = deadline

    @property
    def _end(self) -> float | None:
        return None if self.deadline is None else self.deadline + GRACE

    @property
    def _timed_out(self) -> str:
        shown = ", ".join("/" + n for n in self.names)
        where = self.channel.endpoint
        return f"wait timeout after {format_ms(self.seconds)}, keys: {shown} (store at {where})"

    def then(
        self,
        follow: _wire.Request | None,
        read: _wire.Reader[T] | None,
        pipelined: bool,
        sent: bool = False,
    ) -> T | None:
        """Wait, then (if given) send ``follow`` and return its reply, parsed by ``read``.

        With ``pipelined`` (an rdzv server) WAIT and ``follow`` go out in one write;
        ``sent``: they already went out (with ``pipelined`` and ``follow``), the replies are
        read from here.

        Raises:
            StoreTimeoutError: the keys did not all arrive by the deadline, or the store did
                not finish answering by :data:`GRACE` after it (the connection was closed).
            StoreClosedError: the connection ended, or the store shut down.
            StoreProtocolError: the store answered with bytes the protocol does not allow.
        """
        op, end, channel = self.op, self._end, self.channel
        pipelined = pipelined and follow is not None
        if not sent:
            payload = _wire.encode_request(_wire.Wait(self.keys))
            if pipelined and follow is not None:
                if isinstance(follow, _wire.MultiGet) and follow.keys == self.keys:
                    # The same key list as the WAIT's: reuse its encoding, change the opcode.
                    payload += _MULTI_GET + payload[1:]
                else:
                    payload += _wire.encode_request(follow)
            channel.submit(payload, op, self.deadline, self.seconds)
        try:
            first: int | None = channel.read(_wire.read_u8, self.deadline, op)
        except Expired:
            first = None  # cancelled below, outside this handler: no Expired in the chain
        except StoreClosedError as exc:
            if self.deadline is None or time.monotonic() < self.deadline:
                raise
            raise self._closed_after_timeout(exc) from exc  # the deadline is the cause
        late = first is None
        if first is None:
            first = self._cancel()
        if first == _wire.WAIT_CANCELED:  # unprompted: the server is shutting down
            channel.seen = "shutdown"
            channel.close(f"the store shut down while this client waited ({op})")
            closed = closed_error(
                f"the store at {channel.endpoint} shut down while this client waited for "
                f"{', '.join(self.names)} ({op})",
                "shutdown",
            )
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise self._closed_after_timeout(closed) from closed
            raise closed
        if first != _wire.STOP_WAITING:
            raise self._junk(f"unexpected reply {first} to WAIT ({op})")
        if late and not pipelined and not self._acked():
            if follow is None:
                return None  # the keys are there; only the connection is lost
            raise StoreTimeoutError(
                f"{self._timed_out}: the keys arrived as the deadline passed, but the store did "
                f"not acknowledge CANCEL_WAIT within {GRACE:g} s after it, so {op} was not "
                "sent and the connection was closed"
            )
        if follow is None or read is None:
            return None
        if not pipelined:
            channel.submit(_wire.encode_request(follow), op, end, self.seconds)
        try:
            value = channel.read(read, end, op)
        except Expired:
            channel.close(f"no reply to {op} arrived in time")
            raise StoreTimeoutError(
                f"{self._timed_out}: the keys arrived, but the store did not send its reply to "
                f"{op} by {GRACE:g} s after the deadline; the connection was closed"
            ) from None
        if late and pipelined:
            self._acked()  # the value is in hand either way
        return value

    def _cancel(self) -> int:
        """Send CANCEL_WAIT after the deadline; return STOP_WAITING if the keys won the race.

        Raises:
            StoreTimeoutError: the store answered WAIT_CANCELED (the connection stays
                usable), or did not answer in time (the connection was closed).
        """
        try:
            self.channel.send(_CANCEL, "CANCEL_WAIT", self._end)
            byte = self.channel.read(_wire.read_u8, self._end, "CANCEL_WAIT")
        except StoreClosedError as exc:
            raise self._closed_after_timeout(exc) from exc
        except Expired:
            self.channel.close(f"the store did not answer CANCEL_WAIT after a timed-out {self.op}")
            raise StoreTimeoutError(
                f"{self._timed_out}; the store did not answer CANCEL_WAIT within {GRACE:g} s "
                "after that deadline either, so the connection was closed"
            ) from None
        if byte == _wire.WAIT_CANCELED:
            raise StoreTimeoutError(self._timed_out)
        if byte != _wire.STOP_WAITING:
            raise self._junk(f"unexpected reply {byte} to CANCEL_WAIT")
        return byte

    def _closed_after_timeout(self, exc: StoreClosedError) -> StoreTimeoutError:
        """The wait timed out, and the connection ended after that: a timeout (its cause),
        the close mentioned (invariant 4)."""
        return StoreTimeoutError(f"{self._timed_out}; after that deadline, {exc}")

    def _acked(self) -> bool:
        """Read the WAIT_CANCELED that follows a late STOP_WAITING; False (and the
        connection closed) if it did not come in time."""
        try:
            byte = self.channel.read(_wire.read_u8, self._end, "CANCEL_WAIT")
        except Expired:
            self.channel.close(
                f"the store did not acknowledge CANCEL_WAIT after a late STOP_WAITING ({self.op})"
            )
            return False
        if byte != _wire.WAIT_CANCELED:
            raise self._junk(f"expected WAIT_CANCELED after a late STOP_WAITING, got {byte}")
        return True

    def _junk(self, what: str) -> StoreProtocolError:
        """Close the connection (its reply stream is out of step) and describe the junk."""
        self.channel.close(f"the store broke the protocol: {what}")
        return StoreProtocolError(f"{what} from the store at {self.channel.endpoint}")
