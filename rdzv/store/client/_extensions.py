"""rdzv's extensions of torch's client: requests that go out in one write (one round trip)
where torch's client sends them one at a time. The rendezvous uses them when a store has
them (``getattr``), and does without on any other store.
"""

from __future__ import annotations

from collections.abc import Sequence

from rdzv.store.client._replies import bytes_list_reader, bytes_reader
from rdzv.store.client._requests import HeldGet, Requests
from rdzv.store.client._requests import deadline_in as _deadline
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import to_bytes

TYPE_CHECKING = False

__all__ = [
    "Extensions",
    "add_and_check",
    "add_then_get_frames",
    "amount_of",
    "set_then_append_frames",
]


class Extensions:
    """The extensions, over what :class:`~rdzv.store.client._client.TCPStore` provides."""

    _requests: Requests
    _timeout: float | None
    _limits: _wire.Limits
    if TYPE_CHECKING:  # TCPStore's

        @staticmethod
        def _key(key: str) -> bytes: ...

        def _raw_add(
            self, raw: bytes, amount: int, deadline: float | None = None, then: bytes = b""
        ) -> int: ...

    def add_then_set(
        self,
        key: str,
        amount: int,
        set_key: str,
        value: str | bytes,
        append: tuple[str, str | bytes] | None = None,
    ) -> int:
        """``add(key, amount)`` then ``set(set_key, value)`` (then, if given,
        ``append(*append)``) in one write; return the sum.

        An rdzv extension: the store applies them in order, as if called one after the
        other, but the writes do not wait for the ADD's reply (one round trip, one write).
        Fails like ``add``; when it fails, the writes may or may not have been applied.
        """
        then = self._set_then_append(set_key, value, append)
        return self._raw_add(self._key(key), amount, then=then)

    def _set_then_append(
        self, set_key: str, value: str | bytes, append: tuple[str, str | bytes] | None
    ) -> bytes:
        """The frames of ``set(set_key, value)`` and, if given, ``append(*append)``."""
        k = self._key
        tail = None if append is None else (k(append[0]), to_bytes(append[1]))
        return set_then_append_frames(k(set_key), to_bytes(value), tail)

    def add_then_get(
        self,
        key: str,
        amount: int,
        set_key: str,
        value: str | bytes,
        append: tuple[str, str | bytes],
        check_key: str,
        get_key: str,
    ) -> tuple[int, bool, HeldGet] | None:
        """``add_then_set(key, amount, set_key, value, append)``, ``check([check_key])`` and
        ``get(get_key)`` in one write: the sum and the check are returned at once, with the
        :class:`HeldGet` that waits for ``get_key``'s value. None, with nothing sent, when
        the store cannot serve a request sent behind a WAIT (torch's server).

        An rdzv extension (one round trip for a join's count, confirmation and verdict).
        The connection is busy until the :class:`HeldGet` ends: call its ``get``,
        ``cancel`` or ``release``. Fails like ``add``.
        """
        requests = self._requests
        if not requests.pipelined:
            return None
        k = self._key
        raw_get = k(get_key)
        then = self._set_then_append(set_key, value, append)
        data = add_then_get_frames(k(key), amount_of(amount), then, k(check_key), raw_get)
        (added, checked), held = requests.call_then_hold(
            data,
            add_and_check,
            "ADD",
            _deadline(self._timeout),
            self._timeout,
            raw_get,
            get_key,
            bytes_reader(self._limits),
        )
        return added, checked == _wire.READY, held

    def compare_sets(self, items: Sequence[tuple[str, str | bytes, str | bytes]]) -> list[bytes]:
        """``compare_set(key, expected, desired)`` of each item, in order, in one write; the
        replies, read together (one round trip).

        An rdzv extension: the store applies them in order, as if called one after the
        other, except that no item waits for the one before it to be answered. Fails like
        ``compare_set``; when it fails, any of the items may or may not have been applied.
        """
        key, frame = self._key, _wire.compare_set_frame
        data = b"".join(
            [frame(key(k), to_bytes(expected), to_bytes(desired)) for k, expected, desired in items]
        )
        read = bytes_list_reader(self._limits, len(items))
        return self._requests.call(
            data, read, "COMPARE_SET", _deadline(self._timeout), self._timeout
        )


def amount_of(amount: int) -> int:
    """``amount`` if an ADD can carry it.

    Raises:
        TypeError: not an int.
        ValueError: it does not fit in a signed 64-bit integer.
    """
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise TypeError(f"add amount must be an int, got {amount!r}")
    if not -(2**63) <= amount < 2**63:
        raise ValueError(f"add amount {amount} does not fit in a signed 64-bit integer")
    return amount


def add_and_check(buf: bytes | bytearray, pos: int) -> tuple[tuple[int, int], int]:
    """The replies of an ADD and a CHECK (:meth:`TCPStore.add_then_get`)."""
    added, pos = _wire.read_i64(buf, pos)
    checked, pos = _wire.read_u8(buf, pos)
    return (added, checked), pos


def set_then_append_frames(
    set_key: bytes, value: bytes, append: tuple[bytes, bytes] | None
) -> bytes:
    """The frames of a SET of ``value`` at ``set_key`` and, if given, an APPEND (keys as
    sent: prefixed)."""
    frames = _wire.key_value_frame(_wire.Op.SET, set_key, value)
    if append is not None:
        frames += _wire.key_value_frame(_wire.Op.APPEND, *append)
    return frames


def add_then_get_frames(
    key: bytes, amount: int, then: bytes, check_key: bytes, get_key: bytes
) -> bytes:
    """The write of :meth:`Extensions.add_then_get` (keys as sent: prefixed): the ADD, the
    frames ``then`` (its SET and APPEND), the CHECK, then the WAIT+GET of ``get_key``."""
    return b"".join(
        (
            _wire.add_frame(key, amount),
            then,
            _wire.keys_frame(_wire.Op.CHECK, (check_key,)),
            _wire.keys_frame(_wire.Op.WAIT, (get_key,)),
            _wire.key_frame(_wire.Op.GET, get_key),
        )
    )
