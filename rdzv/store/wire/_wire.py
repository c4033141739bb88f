"""Sans-IO codec of torch's TCPStore wire protocol (as spoken by torch 2.13).

The protocol has no version field and no envelope: a request is one opcode byte followed by
opcode-specific fields; replies are unframed values whose shape the client knows from the
request it sent. The opcode numbering (``Op``, in :mod:`rdzv.store.wire._messages`) is torch
2.13's (``QueryType`` in ``TCPStoreBackend.hpp``, verified against a 2.13 server); older
torch releases numbered the same operations differently, so this codec matches torch 2.x
from the release that added ``LIST_KEYS``/``BARRIER`` onwards.

Encodings (all integers little-endian, the host order of every platform torch ships on):

* byte string (keys and values alike): ``u64 length`` + raw bytes
* key counts (CHECK, WAIT, MULTI_GET, MULTI_SET): ``u64``
* ADD delta/result, GETNUMKEYS, DELETE_KEY, QUEUE_LEN, QUEUE_POP length, LIST_KEYS count,
  BARRIER world size: ``i64``
* VALIDATE magic and PING nonce: ``u32``; CHECK/WAIT/CANCEL_WAIT/BARRIER replies: ``u8``

Invariants kept by this module:

1. No I/O: nothing here imports ``socket``, ``asyncio``, ``time`` or ``random``.
2. The readers raise :class:`Incomplete` rather than consume a byte of a partial field, and
   check every length and count against its cap *before* the payload it announces is
   buffered, so a hostile length prefix costs no memory.

The request messages themselves are :mod:`rdzv.store.wire._messages`' (re-exported here); the
server-side request decoder built on these readers is :mod:`rdzv.store.wire._decoder`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from rdzv.errors import StoreProtocolError
from rdzv.store.wire import _messages as m
from rdzv.store.wire._messages import *  # noqa: F403 (re-exported: callers see one vocabulary)
from rdzv.store.wire._messages import Op, Request

TYPE_CHECKING = False  # ``typing`` stays out of the import line (see rdzv/__init__.py)
if TYPE_CHECKING:
    from typing import Final, TypeAlias, TypeVar

    T = TypeVar("T")
    #: A reply parser: ``(buffer, position) -> (value, next position)``; raises ``Incomplete``.
    Reader: TypeAlias = Callable[[bytearray, int], tuple[T, int]]

__all__ = [
    "NOT_READY",
    "PROBE_KEY",
    "READY",
    "STOP_WAITING",
    "TORCH_PROTOCOL",
    "WAIT_CANCELED",
    "Incomplete",
    "Limits",
    "add_frame",
    "compare_set_frame",
    "encode_bytes",
    "encode_i64",
    "encode_request",
    "encode_u8",
    "encode_u32",
    "key_frame",
    "key_value_frame",
    "keys_frame",
    "ping_frame",
    "read_bytes",
    "read_bytes_list",
    "read_bytes_pairs",
    "read_count",
    "read_counted_bytes_list",
    "read_i64",
    "read_queue_pop",
    "read_u8",
    "read_u32",
]
__all__ += m.__all__

TORCH_PROTOCOL: Final = "torch 2.13 TCPStore (QueryType 0..18)"

#: CHECK/WAIT reply bytes.
READY: Final = 0
NOT_READY: Final = 1
STOP_WAITING: Final = 0
WAIT_CANCELED: Final = 1
#: The key an rdzv client CHECKs during its handshake to learn it may pipeline (an rdzv
#: server answers READY; see :mod:`rdzv.store.state._kv`). Here, so a client needs no ``_kv``.
PROBE_KEY: Final = b"\x00rdzv\x00pipelined-wait"


class Limits:
    """Caps applied while decoding; exceeding one is a protocol error for that connection.

    Attributes:
        max_key: longest key in bytes (torch's libuv server: 8192).
        max_value: longest value in bytes (torch's libuv server: 8 MiB).
        max_keys: most keys in one CHECK/WAIT/MULTI_GET/MULTI_SET (torch: 131072).
        max_frame: most bytes one request may occupy in total.
        max_reply: longest value a client accepts in a reply (appends can build values
            longer than ``max_value``; a reply is only buffered as its bytes arrive).
    """

    __slots__ = ("max_frame", "max_key", "max_keys", "max_reply", "max_value")

    def __init__(
        self,
        max_key: int = 64 * 1024,
        max_value: int = 8 * 1024 * 1024,
        max_keys: int = 128 * 1024,
        max_frame: int = 32 * 1024 * 1024,
        max_reply: int = 2**31,
    ) -> None:
        self.max_key = max_key
        self.max_value = max_value
        self.max_keys = max_keys
        self.max_frame = max_frame
        self.max_reply = max_reply

    def _fields(self) -> tuple[int, int, int, int, int]:
        return (self.max_key, self.max_value, self.max_keys, self.max_frame, self.max_reply)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Limits):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        names = ("max_key", "max_value", "max_keys", "max_frame", "max_reply")
        shown = ", ".join(f"{n}={v}" for n, v in zip(names, self._fields(), strict=True))
        return f"Limits({shown})"


# --- primitive encoders -----------------------------------------------------------------

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")


def encode_u8(value: int) -> bytes:
    """Encode one unsigned byte."""
    return _U8.pack(value)


def encode_u32(value: int) -> bytes:
    """Encode a little-endian u32 (magic, ping nonce)."""
    return _U32.pack(value)


def encode_i64(value: int) -> bytes:
    """Encode a little-endian i64 (counters, counts)."""
    return _I64.pack(value)


def encode_bytes(value: bytes) -> bytes:
    """Encode a byte string as u64 length + bytes."""
    return _U64.pack(len(value)) + value


def _encode_list(keys: Sequence[bytes]) -> bytes:
    pack = _U64.pack
    return b"".join([pack(len(keys)), *[x for k in keys for x in (pack(len(k)), k)]])


def encode_request(req: Request) -> bytes:
    """Encode one request exactly as torch's client sends it.

    Raises:
        TypeError: ``req`` is not a request message.
    """
    encoder = _ENCODERS.get(type(req))
    if encoder is None:
        raise TypeError(f"not a TCPStore request message: {req!r}")
    return encoder(req)


# --- frames: a request's bytes built from its fields (what encode_request uses, and what a
# client on a hot path calls without making a message object first) ---------------------

_OPCODE: Final = tuple(bytes((op,)) for op in range(max(Op) + 1))


def key_value_frame(op: Op, key: bytes, value: bytes) -> bytes:
    """The frame of a SET, APPEND or QUEUE_PUSH (``op``) of ``value`` at ``key``."""
    pack = _U64.pack
    return b"".join((_OPCODE[op], pack(len(key)), key, pack(len(value)), value))


def key_frame(op: Op, key: bytes) -> bytes:
    """The frame of a GET, DELETE_KEY, QUEUE_POP or QUEUE_LEN (``op``) of ``key``."""
    return b"".join((_OPCODE[op], _U64.pack(len(key)), key))


def keys_frame(op: Op, keys: Sequence[bytes]) -> bytes:
    """The frame of a CHECK, WAIT or MULTI_GET (``op``) of ``keys``."""
    return _OPCODE[op] + _encode_list(keys)


def add_frame(key: bytes, delta: int) -> bytes:
    """The frame of an ADD of ``delta`` (a signed 64-bit int) to ``key``."""
    return b"".join((_OPCODE[Op.ADD], _U64.pack(len(key)), key, _I64.pack(delta)))


def compare_set_frame(key: bytes, expected: bytes, desired: bytes) -> bytes:
    """The frame of a COMPARE_SET of ``key`` from ``expected`` to ``desired``."""
    pack = _U64.pack
    fields = (pack(len(key)), key, pack(len(expected)), expected, pack(len(desired)), desired)
    return _OPCODE[Op.COMPARE_SET] + b"".join(fields)


def ping_frame(nonce: int) -> bytes:
    """The frame of a PING carrying ``nonce`` (a u32)."""
    return _OPCODE[Op.PING] + _U32.pack(nonce)


_ENCODERS: Final[dict[type, Callable[..., bytes]]] = {
    m.Validate: lambda r: _U8.pack(Op.VALIDATE) + _U32.pack(r.magic),
    m.Set: lambda r: key_value_frame(Op.SET, r.key, r.value),
    m.CompareSet: lambda r: compare_set_frame(r.key, r.expected, r.desired),
    m.Get: lambda r: key_frame(Op.GET, r.key),
    m.Add: lambda r: add_frame(r.key, r.delta),
    m.Check: lambda r: keys_frame(Op.CHECK, r.keys),
    m.Wait: lambda r: keys_frame(Op.WAIT, r.keys),
    m.GetNumKeys: lambda r: _U8.pack(Op.GETNUMKEYS),
    m.DeleteKey: lambda r: key_frame(Op.DELETE_KEY, r.key),
    m.Append: lambda r: key_value_frame(Op.APPEND, r.key, r.value),
    m.MultiGet: lambda r: keys_frame(Op.MULTI_GET, r.keys),
    m.MultiSet: lambda r: (
        _U8.pack(Op.MULTI_SET)
        + _U64.pack(len(r.items))
        + b"".join([x for k, v in r.items for x in (_U64.pack(len(k)), k, _U64.pack(len(v)), v)])
    ),
    m.CancelWait: lambda r: _U8.pack(Op.CANCEL_WAIT),
    m.Ping: lambda r: ping_frame(r.nonce),
    m.QueuePush: lambda r: key_value_frame(Op.QUEUE_PUSH, r.key, r.value),
    m.QueuePop: lambda r: key_frame(Op.QUEUE_POP, r.key),
    m.QueueLen: lambda r: key_frame(Op.QUEUE_LEN, r.key),
    m.ListKeys: lambda r: _U8.pack(Op.LIST_KEYS),
    m.Barrier: lambda r: key_frame(Op.BARRIER, r.key) + _I64.pack(r.world_size),
}

# --- primitive readers (shared by the request decoder and by clients reading replies) -----


class Incomplete(Exception):
    """More bytes are needed before the value at this position can be read."""


def _need(buf: bytes | bytearray | memoryview, pos: int, n: int) -> None:
    if len(buf) - pos < n:
        raise Incomplete


def read_u8(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read one byte at ``pos``; returns ``(value, next_pos)``. Raises ``Incomplete``."""
    _need(buf, pos, 1)
    return buf[pos], pos + 1


def read_u32(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a u32 at ``pos``. Raises ``Incomplete``."""
    _need(buf, pos, 4)
    return _U32.unpack_from(buf, pos)[0], pos + 4


def read_i64(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read an i64 at ``pos``. Raises ``Incomplete``."""
    _need(buf, pos, 8)
    return _I64.unpack_from(buf, pos)[0], pos + 8


def _read_u64(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    _need(buf, pos, 8)
    return _U64.unpack_from(buf, pos)[0], pos + 8


def read_bytes(
    buf: bytes | bytearray | memoryview, pos: int, cap: int, what: str = "value"
) -> tuple[bytes, int]:
    """Read a u64-length-prefixed byte string, refusing lengths above ``cap``.

    Raises:
        Incomplete: the string is not all there yet.
        StoreProtocolError: the announced length exceeds ``cap``.
    """
    start = pos + 8
    size = len(buf)
    if start > size:
        raise Incomplete
    (length,) = _U64.unpack_from(buf, pos)
    if length > cap:
        raise _too_long(what, length, cap)
    stop = start + length
    if stop > size:
        raise Incomplete
    return bytes(buf[start:stop]), stop


def _too_long(what: str, length: int, cap: int) -> StoreProtocolError:
    return StoreProtocolError(
        f"{what} length {length} exceeds the limit of {cap} bytes; dropping the connection"
    )


def read_count(buf: bytes | bytearray | memoryview, pos: int, cap: int) -> tuple[int, int]:
    count, pos = _read_u64(buf, pos)
    if count > cap:
        raise StoreProtocolError(f"key count {count} exceeds the limit of {cap} keys per request")
    return count, pos


def read_bytes_list(
    buf: bytes | bytearray | memoryview, pos: int, count: int, cap: int, what: str = "value"
) -> tuple[list[bytes], int]:
    """Read ``count`` byte strings (a MULTI_GET reply, the keys of a request), each
    refused when its length exceeds ``cap``.

    Raises:
        Incomplete: not all there yet.
        StoreProtocolError: a length exceeds ``cap``.
    """
    out: list[bytes] = []
    append, unpack, size = out.append, _U64.unpack_from, len(buf)
    try:
        for _ in range(count):  # read_bytes, inlined: this loop runs once per key
            (length,) = unpack(buf, pos)  # struct.error: fewer than 8 bytes left
            if length > cap:
                raise _too_long(what, length, cap)
            start = pos + 8
            pos = start + length
            if pos > size:
                raise Incomplete
            append(bytes(buf[start:pos]))
    except struct.error:
        raise Incomplete from None
    return out, pos


def read_bytes_pairs(
    buf: bytes | bytearray | memoryview, pos: int, count: int, key_cap: int, value_cap: int
) -> tuple[list[bytes], int]:
    """Read ``count`` key-value pairs (a MULTI_SET), flat: ``[key, value, key, ...]``.

    Raises:
        Incomplete: not all there yet.
        StoreProtocolError: a key longer than ``key_cap`` or a value longer than ``value_cap``.
    """
    out: list[bytes] = []
    append, unpack, size = out.append, _U64.unpack_from, len(buf)
    try:
        for _ in range(count):
            (length,) = unpack(buf, pos)
            if length > key_cap:
                raise _too_long("key", length, key_cap)
            start = pos + 8
            pos = start + length
            if pos > size:
                raise Incomplete
            append(bytes(buf[start:pos]))
            (length,) = unpack(buf, pos)
            if length > value_cap:
                raise _too_long("value", length, value_cap)
            start = pos + 8
            pos = start + length
            if pos > size:
                raise Incomplete
            append(bytes(buf[start:pos]))
    except struct.error:
        raise Incomplete from None
    return out, pos


def read_counted_bytes_list(
    buf: bytes | bytearray | memoryview, pos: int, limits: Limits
) -> tuple[list[bytes], int]:
    """Read an i64 count then that many byte strings (a LIST_KEYS reply).

    Raises:
        Incomplete: not all there yet.
        StoreProtocolError: a negative or oversized count, or an oversized key.
    """
    count, pos = read_i64(buf, pos)
    if not 0 <= count <= limits.max_keys * 64:
        raise StoreProtocolError(f"LIST_KEYS reply announced {count} keys")
    return read_bytes_list(buf, pos, count, limits.max_key)


def read_queue_pop(
    buf: bytes | bytearray | memoryview, pos: int, cap: int
) -> tuple[bytes | None, int]:
    """Read a QUEUE_POP reply: i64 length-before-pop, then a value when it was positive."""
    length, pos = read_i64(buf, pos)
    if length <= 0:
        return None, pos
    return read_bytes(buf, pos, cap)
