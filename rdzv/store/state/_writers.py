"""Which connection last changed a key, and callbacks when that connection closes.

Generic: the store knows nothing of rendezvous. :class:`WatchingKV` is the store server's
:class:`~rdzv.store.state._kv.KV` plus *writer watches*. The KV records, for every key, the
connection whose request last changed its value (SET, ADD, a COMPARE_SET that swapped,
APPEND, DELETE_KEY, MULTI_SET, BARRIER), including a request pipelined behind a WAIT that
runs later, from the server's first request on. A request that leaves the value as it was (a
COMPARE_SET that did not swap, a SET of the same bytes) does not make its connection the
writer; a later writer takes the key over from an earlier one.

A watch selects keys with a predicate. When the connection that last changed a selected key
closes, the watch's ``on_close`` gets the key and the value the key holds then (None:
deleted); with ``on_write``, the watch also hears of every change of a selected key. A watch
added while the server runs starts from what the KV recorded: it hears ``on_write`` for every
selected key that exists, and ``on_close`` for those whose writer has already closed, so it
misses nothing written before it was added (call :meth:`WatchingKV.watch_writers` on the
loop thread, as :meth:`rdzv.store.server.StoreServer.watch_writers` does).

Threads: watches are cancelled from any thread (the tuple of watches is replaced, never
changed in place), so a callback may still run once just after its cancel returned.
Everything else runs on the server's loop thread, callbacks included: they must return at
once (start a timer, set an event) and never call the store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rdzv.events import get_logger
from rdzv.store.state._kv import KV, ConnId, _Outbox, _Session
from rdzv.store.wire import _wire as w

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

__all__ = ["Cancel", "OnClose", "OnWrite", "Selects", "WatchingKV"]

_log = get_logger("rdzv.server")

Selects: TypeAlias = Callable[[bytes], bool]
"""``selects(key)``: whether a watch follows the writer of ``key`` (called per write)."""
OnClose: TypeAlias = Callable[[bytes, bytes | None], None]
"""``on_close(key, value)``: the connection that last changed ``key`` closed."""
OnWrite: TypeAlias = Callable[[bytes, bytes | None], None]
"""``on_write(key, value)``: ``key`` now holds ``value`` (None: deleted)."""
Cancel: TypeAlias = Callable[[], None]


class _Watch:
    __slots__ = ("by_conn", "on_close", "on_write", "selects", "writers")

    def __init__(
        self, selects: Selects, on_close: OnClose, on_write: OnWrite | None = None
    ) -> None:
        self.selects = selects
        self.on_close = on_close
        self.on_write = on_write
        self.writers: dict[bytes, ConnId] = {}
        self.by_conn: dict[ConnId, set[bytes]] = {}

    def wrote(self, key: bytes, conn: ConnId) -> None:
        old = self.writers.get(key)
        if old is conn:
            return
        if old is not None:
            keys = self.by_conn[old]
            keys.discard(key)
            if not keys:
                del self.by_conn[old]
        self.writers[key] = conn
        self.by_conn.setdefault(conn, set()).add(key)

    def forget(self, conn: ConnId) -> set[bytes]:
        keys = self.by_conn.pop(conn, set())
        for key in keys:
            del self.writers[key]
        return keys


class WatchingKV(KV):
    """A :class:`~rdzv.store.state._kv.KV` that also follows the writers of every key."""

    def __init__(self) -> None:
        super().__init__()
        self._watches: tuple[_Watch, ...] = ()
        self._watch_lock = threading.Lock()  # serialises add/cancel (any thread)
        self._last_writer: dict[bytes, ConnId] = {}  # from the first request on

    def watch_writers(
        self, selects: Selects, on_close: OnClose, on_write: OnWrite | None = None
    ) -> Cancel:
        """Start a watch (see the module doc); returns the function that cancels it. Call it
        on the loop thread while the server runs (the watch starts from the KV's record)."""
        watch = _Watch(selects, on_close, on_write)
        recorded = sorted((k, c) for k, c in list(self._last_writer.items()) if selects(k))
        closed: list[bytes] = []
        for key, conn in recorded:
            if conn not in self._sessions:  # closed (KV.close forgot its session)
                closed.append(key)
            else:
                watch.wrote(key, conn)
        with self._watch_lock:
            self._watches = (*self._watches, watch)
        for key, _ in recorded:
            _call(on_write, key, self.data.get(key))
        for key in closed:
            _call(on_close, key, self.data.get(key))

        def cancel() -> None:
            with self._watch_lock:
                self._watches = tuple(x for x in self._watches if x is not watch)

        return cancel

    def writer_closed(self, conn: ConnId, notify: bool = True) -> None:
        """``conn`` closed: forget what it wrote and, with ``notify``, call the callbacks
        of the keys it was the last writer of (a failing callback is logged, not raised)."""
        for watch in self._watches:
            for key in sorted(watch.forget(conn)):
                if notify:
                    _call(watch.on_close, key, self.data.get(key))

    def _handle(
        self, conn: ConnId, session: _Session, req: w.Request, now: float, out: _Outbox
    ) -> None:
        kind = type(req)
        if kind not in _WRITES:
            super()._handle(conn, session, req, now, out)
            return
        data = self.data
        if kind is w.MultiSet:
            keys = _written_keys(req)
            before = [data.get(key) for key in keys]
            super()._handle(conn, session, req, now, out)
            for key, old in zip(keys, before, strict=True):
                self._wrote(conn, key, old, data.get(key))
            return
        one: bytes = req.key  # type: ignore[union-attr]  # every kind in _WRITES but MultiSet
        old = data.get(one)
        super()._handle(conn, session, req, now, out)
        self._wrote(conn, one, old, data.get(one))

    def _wrote(self, conn: ConnId, key: bytes, old: object, new: bytes | None) -> None:
        if new is old or new == old:
            return
        self._last_writer[key] = conn
        for watch in self._watches:
            if watch.selects(key):
                watch.wrote(key, conn)
                _call(watch.on_write, key, new)


def _call(callback: OnWrite | OnClose | None, key: bytes, value: bytes | None) -> None:
    if callback is None:
        return
    try:
        callback(key, value)
    except Exception:  # a watcher's bug must not take the server down
        _log.exception("a writer watch failed on key %r", key[:80])


_WRITES = frozenset({w.Set, w.CompareSet, w.Add, w.Append, w.DeleteKey, w.Barrier, w.MultiSet})


def _written_keys(req: w.Request) -> tuple[bytes, ...]:
    """The keys a request may change the value of."""
    # isinstance of a tuple, not a match of class patterns: this runs on every request.
    if isinstance(req, (w.Set, w.CompareSet, w.Add, w.Append, w.DeleteKey, w.Barrier)):
        return (req.key,)
    if isinstance(req, w.MultiSet):
        return tuple(key for key, _ in req.items)
    return ()
