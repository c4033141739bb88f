"""Which connection last changed a watched key, and a callback when that connection closes.

Generic: the store knows nothing of rendezvous. :class:`WatchingKV` is the store server's
:class:`~rdzv.store._kv.KV` plus *writer watches*. A watch selects keys with a predicate; for each
selected key it remembers the connection whose request last changed the key's value (SET,
ADD, a COMPARE_SET that swapped, APPEND, DELETE_KEY, MULTI_SET, BARRIER), including a
request pipelined behind a WAIT that runs later. When that connection closes, the watch's
callback gets the key and the value the key holds then (None: deleted). A request that
leaves the value as it was (a COMPARE_SET that did not swap, a SET of the same bytes) does
not make its connection the writer; a later writer takes the key over from an earlier one.

Threads: watches are added and cancelled from any thread (the tuple of watches is replaced,
never changed in place), so a callback may still run once just after its cancel returned.
Everything else runs on the server's loop thread, callbacks included: they must return at
once (start a timer, set an event) and never call the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from rdzv.store import _wire as w
from rdzv.store._kv import KV, ConnId, _Outbox, _Session

__all__ = ["Cancel", "OnClose", "Selects", "WatchingKV"]

_log = logging.getLogger("rdzv.server")

Selects: TypeAlias = Callable[[bytes], bool]
"""``selects(key)``: whether a watch follows the writer of ``key`` (called per write)."""
OnClose: TypeAlias = Callable[[bytes, bytes | None], None]
"""``on_close(key, value)``: the connection that last changed ``key`` closed."""
Cancel: TypeAlias = Callable[[], None]


@dataclass(eq=False)
class _Watch:
    selects: Selects
    on_close: OnClose
    writers: dict[bytes, ConnId] = field(default_factory=dict)
    by_conn: dict[ConnId, set[bytes]] = field(default_factory=dict)

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
    """A :class:`~rdzv.store._kv.KV` that also follows the writers of watched keys."""

    def __init__(self) -> None:
        super().__init__()
        self._watches: tuple[_Watch, ...] = ()
        self._watch_lock = threading.Lock()  # serialises add/cancel (any thread)

    def watch_writers(self, selects: Selects, on_close: OnClose) -> Cancel:
        """Start a watch (see the module doc); returns the function that cancels it."""
        watch = _Watch(selects, on_close)
        with self._watch_lock:
            self._watches = (*self._watches, watch)

        def cancel() -> None:
            with self._watch_lock:
                self._watches = tuple(x for x in self._watches if x is not watch)

        return cancel

    def writer_closed(self, conn: ConnId, notify: bool = True) -> None:
        """``conn`` closed: forget what it wrote and, with ``notify``, call the callbacks
        of the keys it was the last writer of (a failing callback is logged, not raised)."""
        for watch in self._watches:
            for key in sorted(watch.forget(conn)):
                if not notify:
                    continue
                try:
                    watch.on_close(key, self.data.get(key))
                except Exception:  # a watcher's bug must not take the server down
                    _log.exception("a writer watch failed on key %r", key[:80])

    def _handle(
        self, conn: ConnId, session: _Session, req: w.Request, now: float, out: _Outbox
    ) -> None:
        watches = self._watches
        if watches:
            chosen = [(x, key) for key in _written_keys(req) for x in watches if x.selects(key)]
            if chosen:
                before = [self.data.get(key) for _, key in chosen]
                super()._handle(conn, session, req, now, out)
                for (watch, key), old in zip(chosen, before, strict=True):
                    if self.data.get(key) != old:
                        watch.wrote(key, conn)
                return
        super()._handle(conn, session, req, now, out)


def _written_keys(req: w.Request) -> tuple[bytes, ...]:
    """The keys a request may change the value of."""
    # isinstance of a tuple, not a match of class patterns: this runs on every request.
    if isinstance(req, (w.Set, w.CompareSet, w.Add, w.Append, w.DeleteKey, w.Barrier)):
        return (req.key,)
    if isinstance(req, w.MultiSet):
        return tuple(key for key, _ in req.items)
    return ()
