"""``Store`` ABC with torch's method names, the in-memory ``HashStore`` and ``PrefixStore``.

Values may be ``str`` (UTF-8 encoded) or ``bytes``; results are ``bytes``, as in torch.
Timeouts are ``timedelta`` or seconds; a negative ``timedelta`` means "no timeout" (torch).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import timedelta

from rdzv.errors import QueueEmptyError, StoreTimeoutError
from rdzv.store.state._table import Table
from rdzv.store.wire._convert import DEFAULT_TIMEOUT, Timeout, format_ms, to_bytes, to_seconds

__all__ = ["HashStore", "PrefixStore", "Store"]


class Store(ABC):
    """A key-value store with torch's ``c10d.Store`` method names."""

    @abstractmethod
    def set(self, key: str, value: str | bytes) -> None:
        """Set ``key`` to ``value`` (waking waiters)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Return the value of ``key``, waiting for it up to the store timeout.

        Raises:
            StoreTimeoutError: the key did not appear in time (the message names it).
        """

    @abstractmethod
    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the integer at ``key`` (missing = 0); return the new value."""

    @abstractmethod
    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        """Atomically replace ``expected`` by ``desired``; return the value now stored
        (or ``expected`` when the key is missing and ``expected`` is not empty)."""

    @abstractmethod
    def wait(self, keys: Sequence[str], timeout: Timeout | None = None) -> None:
        """Block until every key exists, up to ``timeout`` (default: the store timeout).

        Raises:
            StoreTimeoutError: some key is still missing at the deadline.
        """

    @abstractmethod
    def check(self, keys: Sequence[str]) -> bool:
        """True iff every key exists (no waiting)."""

    @abstractmethod
    def delete_key(self, key: str) -> bool:
        """Delete ``key``; True if it existed."""

    @abstractmethod
    def num_keys(self) -> int:
        """Number of keys in the whole store (including internal ones, as in torch)."""

    @abstractmethod
    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        """Wait for all ``keys`` (store timeout) and return their values in order."""

    @abstractmethod
    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        """Set every key to the value at the same position."""

    @abstractmethod
    def append(self, key: str, value: str | bytes) -> None:
        """Append ``value`` to ``key``'s value, creating the key if missing."""

    @abstractmethod
    def list_keys(self) -> list[str]:
        """The user-visible keys."""

    @abstractmethod
    def queue_push(self, key: str, value: str | bytes) -> None:
        """Push ``value`` onto queue ``key``."""

    @abstractmethod
    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """Pop the head of queue ``key``; blocks up to the store timeout when ``block``.

        Raises:
            QueueEmptyError: ``block`` is False and the queue is empty.
            StoreTimeoutError: nothing arrived in time.
        """

    @abstractmethod
    def queue_len(self, key: str) -> int:
        """Length of queue ``key`` (0 when unknown)."""

    @property
    @abstractmethod
    def timeout(self) -> timedelta:
        """The default timeout of blocking operations."""

    @abstractmethod
    def set_timeout(self, timeout: Timeout) -> None:
        """Change the default timeout of later blocking operations."""

    def has_extended_api(self) -> bool:
        """True: append, multi_get and multi_set are native."""
        return True

    @staticmethod
    def _check_multi(keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        if len(keys) != len(values):
            raise ValueError(
                f"multi_set got {len(keys)} keys and {len(values)} values; "
                "multiSet keys and values vectors must be of same size"
            )


class HashStore(Store):
    """An in-memory, thread-safe store with the TCP server's exact semantics."""

    def __init__(self, timeout: Timeout = DEFAULT_TIMEOUT) -> None:
        self._kv = Table()
        self._cond = threading.Condition()
        self._timeout = to_seconds(timeout)

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=-1) if self._timeout is None else timedelta(seconds=self._timeout)

    def set_timeout(self, timeout: Timeout) -> None:
        self._timeout = to_seconds(timeout)

    def set(self, key: str, value: str | bytes) -> None:
        with self._cond:
            self._kv.set(to_bytes(key, "key"), to_bytes(value))
            self._cond.notify_all()

    def get(self, key: str) -> bytes:
        self.wait([key])
        with self._cond:
            return self._kv.data.get(to_bytes(key, "key"), b"")

    def add(self, key: str, amount: int) -> int:
        with self._cond:
            total = self._kv.add(to_bytes(key, "key"), int(amount))
            self._cond.notify_all()
            return total

    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        with self._cond:
            result = self._kv.compare_set(
                to_bytes(key, "key"), to_bytes(expected), to_bytes(desired)
            )
            self._cond.notify_all()
            return result

    def wait(self, keys: Sequence[str], timeout: Timeout | None = None) -> None:
        raw = [to_bytes(k, "key") for k in keys]
        seconds = self._timeout if timeout is None else to_seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._cond:
            while not self._kv.check(raw):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    missing = [k for k, r in zip(keys, raw, strict=True) if not self._kv.exists(r)]
                    raise StoreTimeoutError(
                        f"wait timeout after {format_ms(seconds)}, keys: {', '.join(keys)} "
                        f"(still missing: {', '.join(missing)}; HashStore)"
                    )
                self._cond.wait(remaining)

    def check(self, keys: Sequence[str]) -> bool:
        with self._cond:
            return self._kv.check(to_bytes(k, "key") for k in keys)

    def delete_key(self, key: str) -> bool:
        with self._cond:
            return self._kv.delete_key(to_bytes(key, "key"))

    def num_keys(self) -> int:
        with self._cond:
            return len(self._kv.data)

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        self.wait(keys)
        with self._cond:
            return [self._kv.data.get(to_bytes(k, "key"), b"") for k in keys]

    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        self._check_multi(keys, values)
        with self._cond:
            self._kv.multi_set(
                (to_bytes(k, "key"), to_bytes(v)) for k, v in zip(keys, values, strict=True)
            )
            self._cond.notify_all()

    def append(self, key: str, value: str | bytes) -> None:
        with self._cond:
            self._kv.append(to_bytes(key, "key"), to_bytes(value))
            self._cond.notify_all()

    def list_keys(self) -> list[str]:
        with self._cond:
            return [k.decode(errors="surrogateescape") for k in self._kv.data]

    def queue_push(self, key: str, value: str | bytes) -> None:
        with self._cond:
            self._kv.queue_push(to_bytes(key, "key"), to_bytes(value))
            self._cond.notify_all()

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        raw = to_bytes(key, "key")
        while True:
            if block:
                self.wait([key])
            with self._cond:
                _, value = self._kv.queue_pop(raw)
            if value is not None:
                return value
            if not block:
                raise QueueEmptyError(f"queue is empty: {key!r}")

    def queue_len(self, key: str) -> int:
        with self._cond:
            return self._kv.queue_len(to_bytes(key, "key"))


class PrefixStore(Store):
    """A view of ``store`` whose keys are ``prefix + "/" + key`` (torch's PrefixStore)."""

    def __init__(self, prefix: str, store: Store | None) -> None:
        if store is None:
            raise ValueError("store argument cannot be None")
        self.prefix = prefix
        self._store = store

    @property
    def underlying_store(self) -> Store:
        """The wrapped store."""
        return self._store

    @property
    def _underlying_non_prefix_store(self) -> Store:
        store = self._store
        while isinstance(store, PrefixStore):
            store = store._store
        return store

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    @property
    def timeout(self) -> timedelta:
        return self._store.timeout

    def set_timeout(self, timeout: Timeout) -> None:
        self._store.set_timeout(timeout)

    def set(self, key: str, value: str | bytes) -> None:
        self._store.set(self._k(key), value)

    def get(self, key: str) -> bytes:
        return self._store.get(self._k(key))

    def add(self, key: str, amount: int) -> int:
        return self._store.add(self._k(key), amount)

    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        return self._store.compare_set(self._k(key), expected, desired)

    def wait(self, keys: Sequence[str], timeout: Timeout | None = None) -> None:
        self._store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys: Sequence[str]) -> bool:
        return self._store.check([self._k(k) for k in keys])

    def delete_key(self, key: str) -> bool:
        return self._store.delete_key(self._k(key))

    def num_keys(self) -> int:
        return self._store.num_keys()

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        return self._store.multi_get([self._k(k) for k in keys])

    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        self._store.multi_set([self._k(k) for k in keys], values)

    def append(self, key: str, value: str | bytes) -> None:
        self._store.append(self._k(key), value)

    def list_keys(self) -> list[str]:
        head = self._k("")
        return [k[len(head) :] for k in self._store.list_keys() if k.startswith(head)]

    def queue_push(self, key: str, value: str | bytes) -> None:
        self._store.queue_push(self._k(key), value)

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        return self._store.queue_pop(self._k(key), block)

    def queue_len(self, key: str) -> int:
        return self._store.queue_len(self._k(key))

    def has_extended_api(self) -> bool:
        return self._store.has_extended_api()
