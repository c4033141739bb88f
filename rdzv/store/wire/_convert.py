"""What torch accepts at the store's public edge, converted once; durations as messages show them.

Keys and values may be ``str`` (UTF-8 encoded) or ``bytes``; timeouts are ``timedelta`` or
seconds, and a negative ``timedelta`` means "no timeout" (torch). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = [
    "DEFAULT_TIMEOUT",
    "Timeout",
    "format_elapsed",
    "format_ms",
    "to_bytes",
    "to_seconds",
]

Timeout = timedelta | float | int
DEFAULT_TIMEOUT = timedelta(seconds=300)


def to_bytes(value: str | bytes, what: str = "value") -> bytes:
    """Encode a key or value the way torch accepts it (``str`` as UTF-8, or ``bytes``).

    Raises:
        TypeError: ``value`` is neither ``str`` nor ``bytes``.
    """
    if type(value) is str:  # keys: the most frequent
        return value.encode()
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):  # a subclass of str
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"store {what} must be str or bytes, got {type(value).__name__}: {value!r}")


def to_seconds(timeout: Timeout, what: str = "timeout") -> float | None:
    """Convert a timeout to seconds; ``None`` means wait forever (a negative timedelta).

    Raises:
        TypeError: not a timedelta or a number.
        ValueError: a negative number of seconds (use a negative ``timedelta`` for "forever").
    """
    if type(timeout) is float and timeout >= 0:  # what the rendezvous passes, per request
        return timeout
    if isinstance(timeout, timedelta):
        seconds = timeout.total_seconds()
        return None if seconds < 0 else seconds
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"{what} must be a timedelta or seconds, got {timeout!r}")
    if timeout < 0:
        raise ValueError(f"{what} must not be negative, got {timeout!r} seconds")
    return float(timeout)


def format_ms(seconds: float | None) -> str:
    """Render a timeout as torch does in its messages ("300ms")."""
    return "forever" if seconds is None else f"{round(seconds * 1000)}ms"


def format_elapsed(seconds: float, digits: int = 2) -> str:
    """Render an elapsed time in seconds, rounded *up* at ``digits`` decimals.

    A message about a deadline that passed must never show less time than really went by
    (``7.96`` shown as ``7.9`` reads as "gave up early"); rounding up cannot. A difference of
    floating-point noise (under 1e-9 s) is not rounded up.
    """
    scale = 10**digits
    return f"{math.ceil(seconds * scale - 1e-9) / scale:.{digits}f}"
