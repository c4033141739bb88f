"""The store server's fast path: the frequent requests served straight from the received bytes.

The general path decodes a read into request objects (:mod:`rdzv.store.wire._decoder`) and applies
them through :class:`~rdzv.store.state._writers.WatchingKV`; building and dispatching those objects
is most of a request's cost. The function :func:`fast_path` returns parses the leading
requests of one read in place and applies them to the KV's table directly, and stops at the
first request it cannot finish the same way the general path would, leaving it (and
everything after it) to the general path.

Served here: SET, APPEND, COMPARE_SET, GET, ADD, CHECK (rdzv's probe included), WAIT on keys
that all exist, MULTI_GET, MULTI_SET, PING; and rdzv's client's WAIT of one missing key with
the GET of that key pipelined behind it, as the last requests of a read (a member's wait for
its round's verdict): the wait is registered, the GET held behind it, as the general path
does. (A client's first VALIDATE, read whole with torch's
magic, is taken by the connection before this path: :mod:`rdzv.store.server._conn`.)

Invariants (each keeps the replies and the KV's state byte for byte what the general path
makes of the same bytes):

1. Only whole requests are served: a partial frame, an unknown opcode, or any length or
   count over :class:`~rdzv.store.wire._wire.Limits` stops the fast path before that request,
   so the decoder sees it and buffers it, or reports the same error.
2. A request is served here only if it changes nothing but the table, the writer record and
   the session's rdzv mark (the probe): no waiter of a written key (the general path wakes
   them), no wait that would block (but the one WAIT+GET above, registered through
   :meth:`KV.wait_then <rdzv.store.state._kv.KV.wait_then>` exactly as the general path
   registers it), no ADD on a value that is not an integer or that would overflow (a
   protocol error). Such a request is left whole, before any of its effects.
3. Every write the value of which changes records the connection as the key's writer, as
   :meth:`WatchingKV._wrote <rdzv.store.state._writers.WatchingKV._wrote>` does (which runs
   itself when a writer watch exists, so watches hear every write in order).
4. Replies keep the order of the requests; they are returned as one payload, which the
   caller sends with the general path's first reply when it hands it the rest of the read.
   The fast path stops once that payload exceeds :data:`MAX_REPLY` bytes, so the general
   path's back-pressure applies to the rest.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import chain, repeat

from rdzv.store.state._kv import PROBE_KEY
from rdzv.store.state._table import stoll
from rdzv.store.wire._wire import READY, STOP_WAITING, Get, Limits

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, TypeAlias

    from rdzv.store.state._kv import ConnId
    from rdzv.store.state._writers import WatchingKV

Serve: TypeAlias = Callable[["ConnId", bytes], tuple[int, bytes]]
"""``serve(conn, src)``: how many leading bytes of ``src`` were served, and their replies."""

__all__ = ["MAX_REPLY", "Serve", "fast_path"]

#: Bytes of replies after which the fast path leaves the rest of a read to the general
#: path (whose batches stop while the peer leaves its replies unread).
MAX_REPLY: Final = 1024 * 1024

_U64: Final = struct.Struct("<Q")
_I64: Final = struct.Struct("<q")
_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1
_STOP: Final = bytes([STOP_WAITING])
_READY: Final = bytes([READY])
_NOT_READY: Final = bytes([1 - READY])


def fast_path(
    kv: WatchingKV, limits: Limits, clock: Callable[[], float], max_reply: int = MAX_REPLY
) -> Serve:
    """The fast path over ``kv`` (module doc): a function of the connection and one read;
    ``clock`` is the server's, read only when the path registers a wait (its start).

    The connection's session must be validated and not waiting, and nothing of it may be
    buffered or queued: the caller checks. ``kv``'s tables are bound once (they are never
    replaced); its watches are read at every write (they are).
    """
    data = kv.data
    get = data.get
    has = data.__contains__
    queues = kv.queues
    waiters = kv._waiters
    last_writer = kv._last_writer
    wrote = kv._wrote
    unpack = _U64.unpack_from
    unpack_i64 = _I64.unpack_from
    pack = _U64.pack
    pack_i64 = _I64.pack
    max_key = limits.max_key
    max_value = limits.max_value
    max_keys = limits.max_keys

    def serve(conn: ConnId, src: bytes) -> tuple[int, bytes]:
        parts: list[bytes] = []
        size = 0  # of the replies that may be large (GET, MULTI_GET)
        end = len(src)
        pos = 0
        while pos < end:
            op = src[pos]
            if op == 13:  # PING (a handshake's): its u32 nonce is sent back
                if pos + 5 > end:
                    break
                parts.append(src[pos + 1 : pos + 5])
                pos += 5
                continue
            start = pos + 9  # after the opcode and the first length or count
            if start > end:
                break
            (n,) = unpack(src, pos + 1)
            if op == 1 or op == 9:  # noqa: PLR1714  # SET, APPEND
                at = start + n
                if n > max_key or at + 8 > end:
                    break
                (length,) = unpack(src, at)
                stop = at + 8 + length
                if length > max_value or stop > end:
                    break
                key = src[start:at]
                if key in waiters:
                    break
                value = src[at + 8 : stop]
                old = get(key)
                if op == 9 and old is not None:
                    value = old + value
                data[key] = value
                if old != value:
                    if kv._watches:
                        wrote(conn, key, old, value)
                    else:
                        last_writer[key] = conn
                pos = stop
            elif op == 3:  # GET
                stop = start + n
                if n > max_key or stop > end:
                    break
                value = get(src[start:stop], b"")
                parts += (pack(len(value)), value)
                pos = stop
                size += len(value)
                if size > max_reply:
                    break
            elif op == 6 or op == 5 or op == 10:  # noqa: PLR1714  # WAIT, CHECK, MULTI_GET
                if n > max_keys:
                    break
                keys: list[bytes] = []
                append = keys.append
                stop = start
                try:  # unpack raises when a length is not all there (a key may be short)
                    for _ in range(n):
                        (length,) = unpack(src, stop)
                        if length > max_key:
                            break
                        at = stop + 8
                        stop = at + length
                        append(src[at:stop])
                except struct.error:
                    pass
                if len(keys) < n or stop > end:
                    break
                if op == 6:
                    if not (keys[0] in data if n == 1 else all(map(has, keys))):
                        # The wait blocks, or a key is a queue's: the general path's, but
                        # for rdzv's WAIT+GET of one missing key that ends the read.
                        get_end = stop + stop - start + 1
                        if (
                            n == 1
                            and get_end == end
                            and src[stop] == 3
                            and src.startswith(src[start:stop], stop + 1)
                            and not (queues and queues.get(keys[0]))
                        ):
                            kv.wait_then(conn, keys[0], Get(keys[0]), clock())
                            pos = end
                        return pos, b"".join(parts)
                    parts.append(_STOP)
                    # rdzv's client follows a WAIT with a GET of its one key or a MULTI_GET
                    # of its keys, in the same write: read those keys once.
                    if stop == end:
                        pos = stop
                        break
                    if n == 1 and src[stop] == 3 and src.startswith(src[start:stop], stop + 1):
                        value = get(keys[0], b"")
                        parts += (pack(len(value)), value)
                        pos = stop + stop - start + 1
                        size += len(value)
                        if size > max_reply:
                            break
                        continue
                    if not (src[stop] == 10 and src.startswith(src[pos + 1 : stop], stop + 1)):
                        pos = stop
                        continue
                    pos, stop = stop, stop + stop - pos
                    op = 10
                if op == 10:
                    values = list(map(get, keys, repeat(b"")))
                    parts += chain.from_iterable(
                        zip(map(pack, map(len, values)), values, strict=True)
                    )
                    size += sum(map(len, values))
                    if size > max_reply:
                        pos = stop
                        break
                elif n == 1 and keys[0] == PROBE_KEY:  # rdzv's client: it may pipeline
                    kv.speaks_rdzv(conn)
                    parts.append(_READY)
                elif all(map(has, keys)):
                    parts.append(_READY)
                elif queues:  # a key may be a queue's
                    return pos, b"".join(parts)
                else:
                    parts.append(_NOT_READY)
                pos = stop
            elif op == 4:  # ADD
                stop = start + n + 8
                if n > max_key or stop > end:
                    break
                key = src[start : stop - 8]
                if key in waiters:
                    break
                old = get(key)
                (total,) = unpack_i64(src, stop - 8)
                if old is not None:
                    try:
                        total += stoll(old)
                    except ValueError:
                        break
                    if not _I64_MIN <= total <= _I64_MAX:
                        break
                value = str(total).encode()
                data[key] = value
                if old != value:
                    if kv._watches:
                        wrote(conn, key, old, value)
                    else:
                        last_writer[key] = conn
                parts.append(pack_i64(total))
                pos = stop
            elif op == 2:  # COMPARE_SET
                stop = _compare_set(kv, conn, src, start, n, limits, parts)
                if stop < 0:
                    break
                pos = stop
            elif op == 11:  # MULTI_SET
                stop = -1 if n > max_keys else _multi_set(kv, conn, src, start, n, limits)
                if stop < 0:
                    break
                pos = stop
            else:
                break
        return pos, b"".join(parts)

    return serve


def _compare_set(
    kv: WatchingKV,
    conn: ConnId,
    src: bytes,
    pos: int,
    length: int,
    limits: Limits,
    parts: list[bytes],
) -> int:
    """Apply the COMPARE_SET whose key of ``length`` bytes starts at ``pos``, append its
    reply to ``parts`` and return where it ends; -1 (nothing applied): not all there, over a
    limit, or a key with waiters."""
    at = pos + length
    if length > limits.max_key or at + 8 > len(src):
        return -1
    unpack = _U64.unpack_from
    (size,) = unpack(src, at)
    desired_at = at + 8 + size
    if size > limits.max_value or desired_at + 8 > len(src):
        return -1
    (desired_size,) = unpack(src, desired_at)
    stop: int = desired_at + 8 + desired_size
    if desired_size > limits.max_value or stop > len(src):
        return -1
    key = src[pos:at]
    if key in kv._waiters:
        return -1
    data = kv.data
    current = data.get(key)
    expected = src[at + 8 : desired_at]
    # torch's rule: a missing key is set only when ``expected`` is empty, a present one only
    # when it holds ``expected``; else nothing changes and the reply is ``expected`` (the
    # key is missing) or the current value
    if current is None:
        if expected:
            parts += (_U64.pack(len(expected)), expected)
            return stop
    elif current != expected:
        parts += (_U64.pack(len(current)), current)
        return stop
    desired = src[desired_at + 8 : stop]
    data[key] = desired
    kv._wrote(conn, key, current, desired)  # the writer record and the watches, if changed
    parts += (_U64.pack(len(desired)), desired)
    return stop


def _multi_set(
    kv: WatchingKV, conn: ConnId, src: bytes, pos: int, count: int, limits: Limits
) -> int:
    """Apply the MULTI_SET of ``count`` pairs at ``pos`` and return where it ends; -1 (and
    nothing applied): not all there, over a limit, or a key with waiters."""
    keys: list[bytes] = []
    values: list[bytes] = []
    add_key, add_value = keys.append, values.append
    key_cap, value_cap = limits.max_key, limits.max_value
    unpack = _U64.unpack_from
    try:  # unpack raises when a length is not all there (a key or value may be short)
        for _ in range(count):
            (length,) = unpack(src, pos)
            if length > key_cap:
                return -1
            start = pos + 8
            pos = start + length
            add_key(src[start:pos])
            (length,) = unpack(src, pos)
            if length > value_cap:
                return -1
            start = pos + 8
            pos = start + length
            add_value(src[start:pos])
    except struct.error:
        return -1
    if pos > len(src):
        return -1
    data, waiters = kv.data, kv._waiters
    if waiters and not waiters.keys().isdisjoint(keys):
        return -1
    before = list(map(data.get, keys))  # as WatchingKV: the values before the whole request
    data.update(zip(keys, values, strict=True))
    if kv._watches:
        for key, old in zip(keys, before, strict=True):
            kv._wrote(conn, key, old, data[key])
    else:
        kv._last_writer.update(
            {key: conn for key, old in zip(keys, before, strict=True) if data[key] != old}
        )
    return pos
