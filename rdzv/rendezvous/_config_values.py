"""One option's value of the static backend, parsed and checked (pure: no I/O).

The value parsers :mod:`rdzv.rendezvous._static_config` applies to each option (``timeout``,
``rank``, ``start_daemon``, ``listen_fd``), whichever constructor form it came from: each
accepts the spellings torch accepts, and each error names the option and where it came from
(``where``, e.g. "option 'timeout' of RendezvousParameters") and quotes the bad value.
"""

from __future__ import annotations

import math
from datetime import timedelta

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["parse_bool", "parse_listen_fd", "parse_rank", "parse_timeout"]

_TRUE = frozenset({"1", "true", "t", "yes", "y"})
_FALSE = frozenset({"0", "false", "f", "no", "n"})


def parse_timeout(value: Any, where: str) -> timedelta:
    """Return ``value`` (seconds as int/float/decimal string, or a timedelta) as a timedelta.

    Raises:
        ValueError: not a number, not finite, or not positive; the message quotes ``where``.
    """
    rule = "must be a positive number of seconds or a datetime.timedelta"
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where} {rule}; got {value!r} ({type(value).__name__}).")
    else:
        try:
            seconds = float(value)
        except ValueError:
            raise ValueError(f"{where} {rule}; got {value!r}, which is not a number.") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{where} {rule}; got {value!r}.")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{where} {rule}; got {value!r}, which is too large.") from None


def parse_rank(value: Any, world_size: int, where: str) -> int:
    """Return ``value`` as a rank in ``0 .. world_size - 1``.

    Unlike torch, a decimal string is converted (torch keeps ``"0"`` as a string, so the
    node that should host the store does not).

    Raises:
        ValueError: not an integer, or out of range for ``world_size``; names ``where``.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        kind = type(value).__name__
        raise ValueError(f"{where} must be an integer rank; got {value!r} ({kind}).")
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("-").isdecimal() or not text.isascii():
            raise ValueError(f"{where} must be an integer rank; got {value!r}.")
        value = int(text)
    rank: int = value
    if not 0 <= rank < world_size:
        ranks = "0" if world_size == 1 else f"0..{world_size - 1}"
        raise ValueError(
            f"{where} is {rank}, outside the ranks {ranks} of a world of size {world_size}."
        )
    return rank


def parse_bool(value: Any, where: str) -> bool:
    """Return ``value`` as a bool, accepting torch's spellings (see ``get_as_bool``).

    Raises:
        ValueError: any other value; names ``where``.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    spellings = "true/false, 1/0, yes/no, t/f or y/n"
    raise ValueError(f"{where} must be a boolean ({spellings}); got {value!r}.")


def parse_listen_fd(value: Any, where: str) -> int:
    """Return ``value`` as a file descriptor number.

    Raises:
        ValueError: not a non-negative integer; names ``where``.
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{where} must be a file descriptor number; got {value!r}.")
    text = str(value).strip()
    if not text.isdecimal() or not text.isascii():
        raise ValueError(f"{where} must be a non-negative file descriptor number; got {value!r}.")
    return int(text)
