"""Incremental, sans-IO decoder of TCPStore requests (the server side of :mod:`rdzv.store._wire`).

Invariants:

1. Any chunking of a byte stream decodes to the same requests: a partial frame stays
   buffered and no byte of an incomplete request is consumed.
2. Every length and count is checked against :class:`~rdzv.store._wire.Limits` before the payload
   it announces is buffered, and a frame over ``max_frame`` is refused, so a hostile peer
   costs bounded memory.
3. ``RequestDecoder().feed(encode_request(m)) == [m]`` for every request ``m`` within the
   limits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rdzv.errors import StoreProtocolError
from rdzv.store._wire import (
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
    read_count,
    read_i64,
    read_u32,
)

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

    def feed(self, data: bytes | bytearray | memoryview) -> list[Request]:
        """Append ``data`` and return every request now complete, in order.

        Raises:
            StoreProtocolError: only when called again after :attr:`error` was set.
        """
        if self.error is not None:
            raise self.error
        buf = self._buf
        buf += data
        out: list[Request] = []
        pos = self._pos
        end = len(buf)
        try:
            while pos < end:
                try:
                    req, pos = self._parse_one(buf, pos)
                except Incomplete:
                    if end - pos > self.limits.max_frame:
                        raise StoreProtocolError(
                            f"a request exceeds the frame limit of {self.limits.max_frame} bytes"
                        ) from None
                    break
                out.append(req)
        except StoreProtocolError as exc:
            self.error = exc
            buf.clear()
            self._pos = 0
            return out
        if pos == end:
            buf.clear()
            pos = 0
        elif pos > 65536 and pos * 2 > end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out

    def _parse_one(self, buf: bytearray, pos: int) -> tuple[Request, int]:
        op = buf[pos]
        parser = _PARSERS.get(op)
        if parser is None:
            raise StoreProtocolError(
                f"unknown opcode {op} (0x{op:02x}) at the start of a request; "
                "the peer does not speak the TCPStore protocol"
            )
        return parser(self.limits, buf, pos + 1)


def _p_key(lim: Limits, buf: bytearray, pos: int) -> tuple[bytes, int]:
    return read_bytes(buf, pos, lim.max_key, "key")


def _p_val(lim: Limits, buf: bytearray, pos: int) -> tuple[bytes, int]:
    return read_bytes(buf, pos, lim.max_value, "value")


def _p_keys(lim: Limits, buf: bytearray, pos: int) -> tuple[tuple[bytes, ...], int]:
    count, pos = read_count(buf, pos, lim.max_keys)
    cap = lim.max_key
    keys = []
    for _ in range(count):
        key, pos = read_bytes(buf, pos, cap, "key")
        keys.append(key)
    return tuple(keys), pos


def _parse_key_value(
    cls: Callable[[bytes, bytes], Request],
) -> Callable[[Limits, bytearray, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
        key, pos = _p_key(lim, buf, pos)
        value, pos = _p_val(lim, buf, pos)
        return cls(key, value), pos

    return parse


def _parse_key(
    cls: Callable[[bytes], Request],
) -> Callable[[Limits, bytearray, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
        key, pos = _p_key(lim, buf, pos)
        return cls(key), pos

    return parse


def _parse_keys(
    cls: Callable[[tuple[bytes, ...]], Request],
) -> Callable[[Limits, bytearray, int], tuple[Request, int]]:
    def parse(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
        keys, pos = _p_keys(lim, buf, pos)
        return cls(keys), pos

    return parse


def _parse_bare(req: Request) -> Callable[[Limits, bytearray, int], tuple[Request, int]]:
    return lambda lim, buf, pos: (req, pos)


def _parse_validate(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    magic, pos = read_u32(buf, pos)
    return Validate(magic), pos


def _parse_ping(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    nonce, pos = read_u32(buf, pos)
    return Ping(nonce), pos


def _parse_compare_set(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    key, pos = _p_key(lim, buf, pos)
    expected, pos = _p_val(lim, buf, pos)
    desired, pos = _p_val(lim, buf, pos)
    return CompareSet(key, expected, desired), pos


def _parse_add(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    key, pos = _p_key(lim, buf, pos)
    delta, pos = read_i64(buf, pos)
    return Add(key, delta), pos


def _parse_barrier(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    key, pos = _p_key(lim, buf, pos)
    world_size, pos = read_i64(buf, pos)
    return Barrier(key, world_size), pos


def _parse_multi_set(lim: Limits, buf: bytearray, pos: int) -> tuple[Request, int]:
    count, pos = read_count(buf, pos, lim.max_keys)
    key_cap, value_cap = lim.max_key, lim.max_value
    items = []
    for _ in range(count):
        key, pos = read_bytes(buf, pos, key_cap, "key")
        value, pos = read_bytes(buf, pos, value_cap, "value")
        items.append((key, value))
    return MultiSet(tuple(items)), pos


_PARSERS: Final[dict[int, Callable[[Limits, bytearray, int], tuple[Request, int]]]] = {
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
