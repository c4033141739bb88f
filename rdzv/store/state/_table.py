"""Pure store data: the key-value map and the queues, with torch 2.13's semantics (sans-IO).

:class:`Table` is what :class:`rdzv.store.base.HashStore` runs under a lock; the server's
:class:`rdzv.store.state._kv.KV` adds connection sessions and waiters on top. Nothing here does
I/O or reads a clock.

Semantics match torch 2.13's libuv TCPStore server:

1. ``compare_set`` on a missing key creates it only when ``expected`` is empty, and returns
   ``expected`` otherwise; on a present key it swaps only on equality and returns the value
   now stored.
2. ``add`` treats a missing key as 0 and stores decimal ASCII; the existing value is parsed
   like C++ ``std::stoll`` (leading blanks, sign, digits, trailing junk ignored); a value that
   does not parse, or a result outside i64, is an error (the server drops the connection).
3. Every write path wakes the key's waiters (:meth:`Table._wake`, which the server's ``KV``
   implements): SET, ADD, APPEND, MULTI_SET, COMPARE_SET (when it writes); QUEUE_PUSH wakes
   only the first waiter it completes. DELETE wakes nobody.
4. ``check`` counts a non-empty queue as an existing key; ``num_keys`` counts only the
   key-value map (queues are not keys); ``delete_key`` answers 1 if the key existed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["Table", "stoll"]

_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1
_BLANKS: Final = b" \t\n\v\f\r"


def stoll(value: bytes) -> int:
    """Parse ``value`` the way C++ ``std::stoll`` does.

    Raises:
        ValueError: no digits after optional blanks and sign, or outside i64.
    """
    text = value.lstrip(_BLANKS)
    i = 1 if text[:1] in (b"+", b"-") else 0
    j = i
    while j < len(text) and 0x30 <= text[j] <= 0x39:
        j += 1
    if j == i:
        raise ValueError(f"value {value[:40]!r} is not an integer")
    number = int(text[:j])
    if not _I64_MIN <= number <= _I64_MAX:
        raise ValueError(f"value {value[:40]!r} is outside the signed 64-bit range")
    return number


class Table:
    """The store's data: the key-value map and the queues."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.queues: dict[bytes, deque[bytes]] = {}

    def exists(self, key: bytes) -> bool:
        """True if ``key`` is in the map or names a non-empty queue."""
        return key in self.data or bool(self.queues.get(key))

    def check(self, keys: Iterable[bytes]) -> bool:
        """True iff every key exists (see :meth:`exists`)."""
        return all(self.exists(k) for k in keys)

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` at ``key`` and wake its waiters."""
        self.data[key] = value
        self._wake(key)

    def compare_set(self, key: bytes, expected: bytes, desired: bytes) -> bytes:
        """Swap in ``desired`` if the current value is ``expected`` (see invariant 1)."""
        current = self.data.get(key)
        if current is None:
            if expected:
                return expected
        elif current != expected:
            return current
        self.data[key] = desired
        self._wake(key)
        return desired

    def add(self, key: bytes, delta: int) -> int:
        """Add ``delta`` to the integer at ``key`` (missing = 0) and return the sum.

        Raises:
            ValueError: the stored value is not an integer, or the sum overflows i64.
        """
        current = self.data.get(key)
        total = delta + (0 if current is None else stoll(current))
        if not _I64_MIN <= total <= _I64_MAX:
            raise ValueError(f"adding {delta} to key {key[:80]!r} overflows a signed 64-bit int")
        self.data[key] = str(total).encode()
        self._wake(key)
        return total

    def append(self, key: bytes, value: bytes) -> None:
        """Append ``value`` to the value at ``key`` (creating it) and wake its waiters."""
        self.data[key] = self.data.get(key, b"") + value
        self._wake(key)

    def multi_set(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Set every pair in order, waking waiters of each key."""
        for key, value in items:
            self.set(key, value)

    def delete_key(self, key: bytes) -> bool:
        """Delete ``key``; True if it existed. Wakes nobody."""
        return self.data.pop(key, None) is not None

    def queue_push(self, key: bytes, value: bytes) -> None:
        """Append ``value`` to queue ``key`` and wake the first waiter it completes."""
        self.queues.setdefault(key, deque()).append(value)
        self._wake(key, only_one=True)

    def queue_pop(self, key: bytes) -> tuple[int, bytes | None]:
        """Pop the head of queue ``key``: ``(length before the pop, value or None)``."""
        queue = self.queues.get(key)
        if not queue:
            return 0, None
        length = len(queue)
        value = queue.popleft()
        if not queue:
            del self.queues[key]
        return length, value

    def queue_len(self, key: bytes) -> int:
        """Length of queue ``key`` (0 for an unknown queue)."""
        return len(self.queues.get(key, ()))

    def _wake(self, key: bytes, only_one: bool = False) -> None:
        """``key`` was written (invariant 3): nobody waits on a bare table."""
