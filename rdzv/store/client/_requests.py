"""One connection's requests and their replies, in step, by a deadline.

:class:`Requests` is what every ``TCPStore`` operation goes through once it has encoded its
request: the write and the read of its reply under one lock (a TCPStore connection answers
in the order it was asked, so a reply is matched to its request by position), both bounded
by the caller's deadline. A reply that never comes closes the connection, since a later
reply could no longer be matched to its request; a WAIT and the request that follows it go
through :class:`~rdzv.store.client._waits.Wait` under the same lock.
"""

from __future__ import annotations

import contextlib
import threading
import time

from rdzv.errors import StoreClosedError, StoreError, StoreTimeoutError
from rdzv.store.client._transport import Channel, Expired, closed_error
from rdzv.store.client._waits import Wait
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import format_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")

__all__ = ["HeldGet", "Requests", "deadline_in"]


def deadline_in(seconds: float | None) -> float | None:
    """The ``time.monotonic()`` instant ``seconds`` from now (None: no deadline)."""
    return None if seconds is None else time.monotonic() + seconds


class Requests:
    """The requests of one connection (``channel`` to the store at ``endpoint``), one at a
    time; ``pipelined``: the store serves a request behind a WAIT in order (one round trip
    for WAIT and GET). ``timeout`` in each call is the store's configured timeout, which the
    messages name."""

    def __init__(self, channel: Channel, endpoint: str, pipelined: bool) -> None:
        self.channel = channel
        self.endpoint = endpoint
        self.pipelined = pipelined
        self.lock = threading.Lock()

    def send(self, data: bytes, op: str, timeout: float | None) -> None:
        """Send encoded requests that have no reply (checked against a known EOF/reset
        first), by ``timeout`` from now."""
        with self.lock:
            self.channel.submit(data, op, deadline_in(timeout), timeout)

    def call(
        self,
        data: bytes,
        read: _wire.Reader[_T],
        op: str,
        deadline: float | None,
        timeout: float | None,
    ) -> _T:
        """Send the encoded requests ``data`` and read what ``read`` parses (every reply
        they have), both by ``deadline``. A reply that never comes closes the connection:
        later replies could no longer be matched to their requests."""
        with self.lock:
            return self._exchange(data, read, op, deadline, timeout)

    def call_then_hold(
        self,
        data: bytes,
        read: _wire.Reader[_T],
        op: str,
        deadline: float | None,
        timeout: float | None,
        get_key: bytes,
        get_name: str,
        get_read: _wire.Reader[bytes],
    ) -> tuple[_T, HeldGet]:
        """:meth:`call` for ``data`` that ends with WAIT+GET of ``get_key``: read what
        ``read`` parses (the replies before the WAIT's) and return it with the
        :class:`HeldGet` that reads the rest. The connection stays locked until that ends
        (a pipelined store only: it serves the GET once the wait ends)."""
        self.lock.acquire()
        try:
            value = self._exchange(data, read, op, deadline, timeout)
        except BaseException:
            self.lock.release()
            raise
        return value, HeldGet(self, get_key, get_name, get_read)

    def hold(self, get_key: bytes, get_name: str, get_read: _wire.Reader[bytes]) -> HeldGet:
        """The :class:`HeldGet` of a WAIT+GET of ``get_key`` already sent, whose replies
        before it were read (the connection is locked until it ends)."""
        self.lock.acquire()
        return HeldGet(self, get_key, get_name, get_read)

    def _exchange(
        self,
        data: bytes,
        read: _wire.Reader[_T],
        op: str,
        deadline: float | None,
        timeout: float | None,
    ) -> _T:
        self.channel.submit(data, op, deadline, timeout)
        return self.finish(read, op, deadline, timeout)

    def finish(
        self, read: _wire.Reader[_T], op: str, deadline: float | None, timeout: float | None
    ) -> _T:
        """Read what ``read`` parses of the replies to requests already sent (``op``), by
        ``deadline``, as :meth:`call` does (the caller holds the lock, or no one else has
        the connection yet)."""
        try:
            return self._read(read, deadline, op)
        except Expired:
            self.channel.close(f"no reply to {op} arrived in time")
            raise StoreTimeoutError(
                f"no reply to {op} from the store at {self.endpoint} within "
                f"{format_ms(timeout)}; the connection was closed"
            ) from None

    def wait_then(
        self,
        keys: tuple[bytes, ...],
        follow: _wire.Request | None,
        read: _wire.Reader[_T] | None,
        op: str,
        names: list[str],
        seconds: float | None,
        deadline: float | None,
    ) -> _T | None:
        """WAIT for ``keys`` until ``deadline`` (set ``seconds`` from the call's start)
        then, if given, send ``follow`` and read its reply with ``read`` (see ``_waits``)."""
        wait = Wait(self.channel, keys, names, op, seconds, deadline)
        with self.lock:
            return wait.then(follow, read, self.pipelined)

    def _read(self, read: _wire.Reader[_T], deadline: float | None, op: str) -> _T:
        try:
            return self.channel.read(read, deadline, op)
        except StoreClosedError as exc:
            if op == "ADD" and exc.seen == "eof":  # a clean close right after ADD
                raise closed_error(
                    f"{exc}; the request was an ADD, which a TCPStore server rejects by "
                    "closing the connection when the key's value is not an integer",
                    "eof",
                ) from exc
            raise


class HeldGet:
    """The reply to a WAIT+GET that went out in one write behind requests whose replies
    were read first (:meth:`Requests.call_then_hold`). The connection stays locked (no
    other request can be matched to a reply meanwhile) until :meth:`get` or :meth:`cancel`
    ends the wait, or :meth:`release` does: a wait nobody ended is cancelled, so the
    connection is left in step or closed, never with a reply outstanding."""

    __slots__ = ("_ended", "_key", "_name", "_read", "_requests")

    def __init__(
        self, requests: Requests, key: bytes, name: str, read: _wire.Reader[bytes]
    ) -> None:
        self._requests = requests
        self._key = key
        self._name = name
        self._read = read
        self._ended = False

    def get(self, seconds: float | None, deadline: float | None = None) -> bytes:
        """The value, once the key exists, waiting ``seconds`` from now at most (None: no
        bound; ``deadline``: the ``time.monotonic()`` instant those seconds end, when they
        began before the call).

        Raises:
            StoreTimeoutError: the key did not arrive in time (the wait was cancelled, or
                the connection closed).
            StoreClosedError: the connection ended, or the store shut down.
        """
        if self._ended:
            raise RuntimeError("this held GET already ended")
        requests = self._requests
        if deadline is None:
            deadline = deadline_in(seconds)
        wait = Wait(requests.channel, (self._key,), [self._name], "GET", seconds, deadline)
        try:
            value = wait.then(_wire.Get(self._key), self._read, True, sent=True)
        finally:
            self._end()
        assert value is not None
        return value

    def cancel(self) -> bytes | None:
        """End the wait now: the value if the key had already arrived, else None (the wait
        was cancelled; the connection is usable).

        Raises:
            StoreTimeoutError: the store did not answer the cancel (the connection closed).
            StoreClosedError: the connection ended, or the store shut down.
        """
        try:
            return self.get(0.0)
        except StoreTimeoutError:
            if self._requests.channel.closed:
                raise
            return None

    def release(self) -> None:
        """End the wait if nothing did (cancelling it; a failure closes the connection and
        is not raised: the caller is already on its way out). Idempotent."""
        if self._ended:
            return
        with contextlib.suppress(StoreError):
            self.cancel()

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._requests.lock.release()
