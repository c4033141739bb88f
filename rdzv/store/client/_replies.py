"""Readers of a reply's shape, bound to a client's limits (the longest reply it accepts):
what :class:`~rdzv.store.client._client.TCPStore` hands its channel to parse a reply."""

from __future__ import annotations

from rdzv.store.wire import _wire

__all__ = ["bytes_list_reader", "bytes_reader", "queue_pop_reader"]


def bytes_reader(limits: _wire.Limits) -> _wire.Reader[bytes]:
    cap = limits.max_reply

    def read(buf: bytearray, pos: int) -> tuple[bytes, int]:
        return _wire.read_bytes(buf, pos, cap)

    return read


def bytes_list_reader(limits: _wire.Limits, count: int) -> _wire.Reader[list[bytes]]:
    """Reads ``count`` byte strings: a MULTI_GET's reply, or ``count`` COMPARE_SETs'."""
    cap = limits.max_reply

    def read(buf: bytearray, pos: int) -> tuple[list[bytes], int]:
        return _wire.read_bytes_list(buf, pos, count, cap)

    return read


def queue_pop_reader(limits: _wire.Limits) -> _wire.Reader[bytes | None]:
    """Reads a QUEUE_POP's reply: the value, or None when the queue was empty."""
    cap = limits.max_reply

    def read(buf: bytearray, pos: int) -> tuple[bytes | None, int]:
        return _wire.read_queue_pop(buf, pos, cap)

    return read
