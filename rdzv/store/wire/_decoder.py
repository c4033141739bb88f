"""Incremental, sans-IO decoder of TCPStore requests (the server side of
:mod:`rdzv.store.wire._wire`).

Invariants:

1. Any chunking of a byte stream decodes to the same requests: a partial frame stays
   buffered and no byte of an incomplete request is consumed.
2. Every length and count is checked against :class:`~rdzv.store.wire._wire.Limits` before
   the payload it announces is buffered, and a frame over ``max_frame`` is refused, so a
   hostile peer costs bounded memory.
3. ``RequestDecoder().feed(encode_request(m)) == [m]`` for every request ``m`` within the
   limits.
"""

from __future__ import annotations

from collections.abc import Callable

from rdzv.errors import StoreProtocolError
from rdzv.store.wire._wire import (
    Add,
    Append,
    Barrier,
    CancelWait,
    Check,
    CompareSet,
    DeleteKey,
    Get,
    GetNumKeys,
    Incomplete,
    Limits,
    ListKeys,
    MultiGet,
    MultiSet,
    Op,
    Ping,
    QueueLen,
    QueuePop,
    QueuePush,
    Request,
    Set,
    Validate,
    Wait,
    read_bytes,
    read_bytes_list,
    read_bytes_pairs,
    read_count,
    read_i64,
    read_u32,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, TypeAlias

__all__ = ["RequestDecoder"]


class RequestDecoder:
    """Incremental decoder: feed it bytes as they arrive, get whole requests back.

    On an unknown opcode or a field over the limits, :meth:`feed` still returns the requests
    decoded before the bad one and sets :attr:`error`; the connection should then be
    dropped, and any later :meth:`feed` raises that error.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.error: StoreProtocolError | None = None
        self._buf = bytearray()
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet decoded (a partial frame)."""
        return len(self._buf) - self._pos

    @property
    def first_byte(self) -> int | None:
        """The opcode of the partial frame buffered (None: nothing is)."""
        return self._buf[self._pos] if self.buffered else None

    def discard(self) -> None:
        """Release the partial frame (the connection closed)."""
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Request]:
        """Append ``data`` and return every request now complete, in order.

        Raises:
            StoreProtocolError: only when called again after :attr:`error` was set.
        """
        if self.error is not None:
            raise self.error
        buf = self._buf
        src: bytes | bytearray
        if buf:
            # A partial frame is buffered: parse where it starts, in the buffer.
            buf += data
            src, pos = buf, self._pos
        else:
            # The common case: nothing buffered. Parse an immutable copy, whose slices are
            # the keys and values themselves (one copy each, not two).
            src, pos = bytes(data), 0
        out: list[Request] = []
        end = len(src)
        parsers, limits = _PARSERS, self.limits
        try:
            while pos < end:
                parser = parsers.get(src[pos])
                if parser is None:
                    raise _unknown(src[pos])
                try:
                    req, pos = parser(limits, src, pos + 1)
                except Incomplete:
                    if end - pos > limits.max_frame:
                        raise StoreProtocolError(
                            f"a request exceeds the frame limit of {limits.max_frame} bytes"
                        ) from None
                    break
                out.append(req)
        except StoreProtocolError as exc:
            # Without its traceback: the frames would keep the received bytes alive for as
            # long as the error is kept.
            self.error = exc.with_traceback(None)
            buf.clear()
            self._pos = 0
            return out
        if src is not buf:
            if pos < end:
                buf += src[pos:]  # keep the partial frame
            self._pos = 0
        elif pos == end:
            buf.clear()
            self._pos = 0
        elif pos > 65536 and pos * 2 > end:
            del buf[:pos]
            self._pos = 0
        else:
            self._pos = pos
        return out


def _unknown(op: int) -> StoreProtocolError:
    return StoreProtocolError(
        f"unknown opcode {op} (0x{op:02x}) at the start of a request; "
        "the peer does not speak the TCPStore protocol"
    )


#: What the parsers read from: the received bytes, or the buffer holding a partial frame.
Buf: TypeAlias = bytes | bytearray


def _p_keys(lim: Limits, buf: Buf, pos: int) -> tuple[tuple[bytes, ...], int]:
    count, pos = read_count(buf, pos, lim.max_keys)
    keys, pos = read_bytes_list(buf, pos, count, lim.max_key, "key")
    return tuple(keys), pos


def _parse_key_value(
    cls: Callable[[bytes, bytes], Request],
) -> Callable[[Limits, Buf, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
        key, pos = read_bytes(buf, pos, lim.max_key, "key")
        value, pos = read_bytes(buf, pos, lim.max_value, "value")
        return cls(key, value), pos

    return parse


def _parse_key(
    cls: Callable[[bytes], Request],
) -> Callable[[Limits, Buf, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
        key, pos = read_bytes(buf, pos, lim.max_key, "key")
        return cls(key), pos

    return parse


def _parse_keys(
    cls: Callable[[tuple[bytes, ...]], Request],
) -> Callable[[Limits, Buf, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
        keys, pos = _p_keys(lim, buf, pos)
        return cls(keys), pos

    return parse


def _parse_bare(req: Request) -> Callable[[Limits, Buf, int], tuple[Request, int]]:
    return lambda lim, buf, pos: (req, pos)


def _parse_validate(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    magic, pos = read_u32(buf, pos)
    return Validate(magic), pos


def _parse_ping(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    nonce, pos = read_u32(buf, pos)
    return Ping(nonce), pos


def _parse_compare_set(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    key, pos = read_bytes(buf, pos, lim.max_key, "key")
    expected, pos = read_bytes(buf, pos, lim.max_value, "value")
    desired, pos = read_bytes(buf, pos, lim.max_value, "value")
    return CompareSet(key, expected, desired), pos


def _parse_add(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    key, pos = read_bytes(buf, pos, lim.max_key, "key")
    delta, pos = read_i64(buf, pos)
    return Add(key, delta), pos


def _parse_barrier(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    key, pos = read_bytes(buf, pos, lim.max_key, "key")
    world_size, pos = read_i64(buf, pos)
    return Barrier(key, world_size), pos


def _parse_multi_set(lim: Limits, buf: Buf, pos: int) -> tuple[Request, int]:
    count, pos = read_count(buf, pos, lim.max_keys)
    flat, pos = read_bytes_pairs(buf, pos, count, lim.max_key, lim.max_value)
    return MultiSet(tuple(zip(flat[::2], flat[1::2], strict=True))), pos


_PARSERS: Final[dict[int, Callable[[Limits, Buf, int], tuple[Request, int]]]] = {
    Op.VALIDATE: _parse_validate,
    Op.SET: _parse_key_value(Set),
    Op.COMPARE_SET: _parse_compare_set,
    Op.GET: _parse_key(Get),
    Op.ADD: _parse_add,
    Op.CHECK: _parse_keys(Check),
    Op.WAIT: _parse_keys(Wait),
    Op.GETNUMKEYS: _parse_bare(GetNumKeys()),
    Op.DELETE_KEY: _parse_key(DeleteKey),
    Op.APPEND: _parse_key_value(Append),
    Op.MULTI_GET: _parse_keys(MultiGet),
    Op.MULTI_SET: _parse_multi_set,
    Op.CANCEL_WAIT: _parse_bare(CancelWait()),
    Op.PING: _parse_ping,
    Op.QUEUE_PUSH: _parse_key_value(QueuePush),
    Op.QUEUE_POP: _parse_key(QueuePop),
    Op.QUEUE_LEN: _parse_key(QueueLen),
    Op.LIST_KEYS: _parse_bare(ListKeys()),
    Op.BARRIER: _parse_barrier,
}
