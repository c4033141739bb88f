"""The store server's fast path: the frequent requests served straight from the received bytes.

The general path decodes a read into request objects (:mod:`rdzv.store._decoder`) and applies
them through :class:`~rdzv.store._writers.WatchingKV`; building and dispatching those objects
is most of a request's cost. :func:`serve` parses the leading requests of one read in place and
applies them to the KV's table directly, and stops at the first request it cannot finish the
same way the general path would, leaving it (and everything after it) to the general path.

Served here: SET, GET, ADD, CHECK, WAIT on keys that all exist, MULTI_GET, MULTI_SET.

Invariants (each keeps the replies and the KV's state byte for byte what the general path
makes of the same bytes):

1. Only whole requests are served: a partial frame, an unknown opcode, or any length or
   count over :class:`~rdzv.store._wire.Limits` stops the fast path before that request,
   so the decoder sees it and buffers it, or reports the same error.
2. A request is served here only if it changes nothing but the table and the writer record:
   no waiter of a written key (the general path wakes them), no wait that would block, no
   CHECK of :data:`~rdzv.store._kv.PROBE_KEY` (it marks the session), no ADD on a value
   that is not an integer or that would overflow (a protocol error). Such a request is left
   whole, before any of its effects.
3. Every write the value of which changes records the connection as the key's writer, as
   :meth:`WatchingKV._wrote <rdzv.store._writers.WatchingKV._wrote>` does (which runs
   itself when a writer watch exists, so watches hear every write in order).
4. Replies keep the order of the requests; they are returned as one payload, which the
   caller sends before handing the rest of the read to the general path. The fast path stops
   once that payload exceeds ``max_reply`` bytes, so the general path's back-pressure
   applies to the rest.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from rdzv.store._kv import PROBE_KEY
from rdzv.store._table import stoll
from rdzv.store._wire import READY, STOP_WAITING, Limits, Op

if TYPE_CHECKING:
    from collections.abc import Hashable

    from rdzv.store._writers import WatchingKV

__all__ = ["serve"]

_U64: Final = struct.Struct("<Q")
_I64: Final = struct.Struct("<q")
_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1
_SET: Final = int(Op.SET)
_GET: Final = int(Op.GET)
_ADD: Final = int(Op.ADD)
_CHECK: Final = int(Op.CHECK)
_WAIT: Final = int(Op.WAIT)
_MULTI_GET: Final = int(Op.MULTI_GET)
_MULTI_SET: Final = int(Op.MULTI_SET)
_KEY_LISTS: Final = frozenset({_WAIT, _CHECK, _MULTI_GET})
_STOP: Final = bytes([STOP_WAITING])
_READY: Final = bytes([READY])
_NOT_READY: Final = bytes([1 - READY])


def serve(
    kv: WatchingKV, conn: Hashable, src: bytes, limits: Limits, max_reply: int
) -> tuple[int, bytes]:
    """Serve the leading requests of ``src`` that the fast path can finish (module doc).

    ``conn``'s session must be validated and not waiting: the caller checks.

    Returns:
        How many bytes of ``src`` were served, and the replies to them, in order.
    """
    data = kv.data
    waiters = kv._waiters
    last_writer = kv._last_writer
    watched = bool(kv._watches)
    unpack = _U64.unpack_from
    pack = _U64.pack
    max_key = limits.max_key
    max_value = limits.max_value
    max_keys = limits.max_keys
    parts: list[bytes] = []
    size = 0  # of the replies that may be large (GET, MULTI_GET)
    end = len(src)
    pos = 0
    while pos < end and size <= max_reply:
        op = src[pos]
        start = pos + 9  # after the opcode and the first length or count
        if start > end:
            break
        (n,) = unpack(src, pos + 1)
        if op == _SET:
            if n > max_key:
                break
            at = start + n
            if at + 8 > end:
                break
            (length,) = unpack(src, at)
            stop = at + 8 + length
            if length > max_value or stop > end:
                break
            key = src[start:at]
            if key in waiters:
                break
            value = src[at + 8 : stop]
            old = data.get(key)
            data[key] = value
            if old != value:
                if watched:
                    kv._wrote(conn, key, old, value)
                else:
                    last_writer[key] = conn
            pos = stop
        elif op == _GET:
            stop = start + n
            if n > max_key or stop > end:
                break
            value = data.get(src[start:stop], b"")
            parts.append(pack(len(value)))
            parts.append(value)
            size += len(value)
            pos = stop
        elif op in _KEY_LISTS:
            if n > max_keys:
                break
            keys, stop = _keys(src, start, n, max_key)
            if stop < 0:
                break
            if op == _MULTI_GET:
                for key in keys:
                    value = data.get(key, b"")
                    parts.append(pack(len(value)))
                    parts.append(value)
                    size += len(value)
            elif op == _WAIT:
                for key in keys:
                    if key not in data:
                        return pos, b"".join(parts)  # blocks, or a queue key: general path
                parts.append(_STOP)
            elif n == 1 and keys[0] == PROBE_KEY:
                break
            else:
                for key in keys:
                    if key not in data:
                        if kv.queues:
                            return pos, b"".join(parts)
                        parts.append(_NOT_READY)
                        break
                else:
                    parts.append(_READY)
            pos = stop
        elif op == _ADD:
            stop = start + n + 8
            if n > max_key or stop > end:
                break
            key = src[start : stop - 8]
            if key in waiters:
                break
            old = data.get(key)
            (delta,) = _I64.unpack_from(src, stop - 8)
            if old is None:
                total = delta
            else:
                try:
                    total = delta + stoll(old)
                except ValueError:
                    break
            if not _I64_MIN <= total <= _I64_MAX:
                break
            value = str(total).encode()
            data[key] = value
            if old != value:
                if watched:
                    kv._wrote(conn, key, old, value)
                else:
                    last_writer[key] = conn
            parts.append(_I64.pack(total))
            pos = stop
        elif op == _MULTI_SET:
            if n > max_keys:
                break
            stop = _multi_set(kv, conn, src, start, n, limits)
            if stop < 0:
                break
            pos = stop
        else:
            break
    return pos, b"".join(parts)


def _keys(src: bytes, pos: int, count: int, cap: int) -> tuple[list[bytes], int]:
    """``count`` length-prefixed keys from ``pos``, and where they end; -1: not all there,
    or one longer than ``cap``."""
    keys: list[bytes] = []
    append, unpack, end = keys.append, _U64.unpack_from, len(src)
    for _ in range(count):
        start = pos + 8
        if start > end:
            return keys, -1
        (length,) = unpack(src, pos)
        pos = start + length
        if length > cap or pos > end:
            return keys, -1
        append(src[start:pos])
    return keys, pos


def _multi_set(
    kv: WatchingKV, conn: Hashable, src: bytes, pos: int, count: int, limits: Limits
) -> int:
    """Apply the MULTI_SET of ``count`` pairs at ``pos`` and return where it ends; -1 (and
    nothing applied): not all there, over a limit, or a key with waiters."""
    keys: list[bytes] = []
    values: list[bytes] = []
    key_cap, value_cap = limits.max_key, limits.max_value
    unpack, end = _U64.unpack_from, len(src)
    for _ in range(count):
        start = pos + 8
        if start > end:
            return -1
        (length,) = unpack(src, pos)
        pos = start + length
        if length > key_cap or pos + 8 > end:
            return -1
        keys.append(src[start:pos])
        (length,) = unpack(src, pos)
        start = pos + 8
        pos = start + length
        if length > value_cap or pos > end:
            return -1
        values.append(src[start:pos])
    data, waiters = kv.data, kv._waiters
    if waiters and not waiters.keys().isdisjoint(keys):
        return -1
    before = list(map(data.get, keys))  # as WatchingKV: the values before the whole request
    data.update(zip(keys, values, strict=True))
    last_writer, watched = kv._last_writer, bool(kv._watches)
    for key, old in zip(keys, before, strict=True):
        new = data[key]
        if new is not old and new != old:
            if watched:
                kv._wrote(conn, key, old, new)
            else:
                last_writer[key] = conn
    return pos
