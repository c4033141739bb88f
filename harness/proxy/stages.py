"""Toxics at work: one stage per toxic and link, in virtual time (no I/O, no clock).

A *stage* (:class:`Stage`, from :func:`make_stage`) is one toxic
(:class:`~harness.proxy.toxics.Toxic`) acting on one link (one direction of one
connection). Stages work in *virtual time*: each item handed to :meth:`Stage.push` carries
the time it reached the stage, and the stage answers with the items it passes on, each
stamped with the time it leaves (``due``), plus an optional deadline at which
:meth:`Stage.expire` must be called. Randomness comes only from the ``rng`` argument. The
relay (:mod:`harness.proxy.relay`) turns due times into real waits.

Invariants:

1. A stage emits items in order and with non-decreasing due times; it never drops or
   reorders bytes unless dropping is its documented job (``timeout``, ``reset_peer``,
   ``limit_data`` past the limit).
2. After a stage emits an :class:`End` it has finished: later input is discarded.
3. Times are seconds on the caller's monotonic clock; attributes are Toxiproxy's units
   (ms, KB/s, bytes, µs for the slicer delay).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from random import Random
from types import MappingProxyType
from typing import Literal, NamedTuple

from harness.errors import InvalidRequestError
from harness.proxy.toxics import Toxic

__all__ = ["End", "Item", "Stage", "Step", "make_stage", "roll", "slice_bounds"]


def roll(toxicity: float, rng: Random) -> bool:
    """Toxiproxy's toxicity draw: the toxic acts on a link when ``rng.random() < toxicity``."""
    return rng.random() < toxicity


@dataclass(frozen=True, slots=True)
class End:
    """End of a link's data: ``eof`` (the source closed), or ``close``/``reset`` by a toxic."""

    kind: Literal["eof", "close", "reset"]
    toxic: str | None = None


Item = bytes | End
Emit = tuple[float, Item]


class Step(NamedTuple):
    """What a stage did with one input: items passed on, next deadline, a note to log."""

    out: tuple[Emit, ...] = ()
    deadline: float | None = None
    note: str | None = None


class Stage:
    """One toxic acting on one link; subclasses implement :meth:`_data`."""

    def __init__(self, name: str, attributes: Mapping[str, int]) -> None:
        self.name = name
        self.attrs = attributes
        self.done = False
        self.last = -math.inf  # due time of the last item emitted (FIFO floor)
        self.noted = False  # the first action of a data-shaping toxic is logged once

    def _first_time(self, note: str) -> str | None:
        """``note`` the first time this stage shapes data, None after (keeps the log small)."""
        if self.noted:
            return None
        self.noted = True
        return note

    def start(self, now: float) -> Step:
        """Called when the stage starts on a link (connect, add or update)."""
        del now
        return Step()

    def push(self, item: Item, arrive: float, rng: Random) -> Step:
        """Take one item that reached this stage at virtual time ``arrive``."""
        if self.done:
            return Step()
        if isinstance(item, End):
            return self._end(item, max(arrive, self.last))
        return self._data(item, arrive, rng)

    def expire(self, now: float) -> Step:
        """Called once the deadline of the last :class:`Step` has passed."""
        del now
        return Step()

    def _emit(self, due: float, item: Item) -> Emit:
        self.last = max(self.last, due)
        if isinstance(item, End):
            self.done = True
        return (self.last, item)

    def _end(self, end: End, at: float) -> Step:
        return Step((self._emit(at, end),))

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        return Step((self._emit(arrive, data),))


class Latency(Stage):
    """Hold each chunk ``latency ± jitter`` ms after it arrives; order is kept."""

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        delay, jitter = self.attrs["latency"], self.attrs["jitter"]
        if jitter > 0:
            delay += rng.randrange(2 * jitter) - jitter
        note = (
            self._first_time(f"delaying data by {self.attrs['latency']} ms") if delay > 0 else None
        )
        return Step((self._emit(arrive + max(delay, 0) / 1000, data),), note=note)


class Bandwidth(Stage):
    """Pass ``rate`` KB/s (1 KB = 1000 B) in slices of at most 100 ms; rate <= 0 stalls."""

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        rate = self.attrs["rate"]
        start = max(arrive, self.last)
        if rate <= 0:
            note = None if self.last == math.inf else "stalled: rate <= 0 holds all data"
            return Step((self._emit(math.inf, data),), note=note)
        step, per_second = rate * 100, rate * 1000
        out = [
            self._emit(start + min(i + step, len(data)) / per_second, data[i : i + step])
            for i in range(0, len(data), step)
        ]
        return Step(tuple(out), note=self._first_time(f"throttling data to {rate} KB/s"))


def slice_bounds(length: int, average: int, variation: int, rng: Random) -> list[int]:
    """Piece boundaries ``[0, ..., length]`` of Toxiproxy's slicer (midpoint splits).

    ``average`` below 1 is taken as 1 and ``variation`` below 0 as 0 (Toxiproxy recurses
    forever or panics on those). With variation 0 every piece but the last is ``average``.
    """
    average, variation = max(average, 1), max(variation, 0)
    if variation == 0:
        return [*range(0, length, average), length] if length else [0]
    bounds, todo = [length], [(0, length)]
    while todo:
        start, end = todo.pop()
        if end - start <= average + variation:
            bounds.append(start)
            continue
        mid = start + (end - start) // 2 + rng.randrange(2 * variation) - variation
        mid = min(max(mid, start + 1), end - 1)
        todo += [(start, mid), (mid, end)]
    return sorted(bounds)


class Slicer(Stage):
    """Split chunks into ``average_size ± size_variation`` pieces, ``delay`` µs apart."""

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        bounds = slice_bounds(
            len(data), self.attrs["average_size"], self.attrs["size_variation"], rng
        )
        gap, start = max(self.attrs["delay"], 0) / 1e6, max(arrive, self.last)
        pieces = itertools.pairwise(bounds)
        out = tuple(self._emit(start + k * gap, data[a:b]) for k, (a, b) in enumerate(pieces))
        self.last = start + len(out) * gap
        return Step(out, note=self._first_time("slicing data"))


class SlowClose(Stage):
    """Pass data unchanged; delay the end of the link by ``delay`` ms."""

    def _end(self, end: End, at: float) -> Step:
        delay = max(self.attrs["delay"], 0)
        return Step((self._emit(at + delay / 1000, end),), note=f"close delayed by {delay} ms")


class Timeout(Stage):
    """Drop all data; close after ``timeout`` ms without input (0: black hole forever)."""

    def __init__(self, name: str, attributes: Mapping[str, int]) -> None:
        super().__init__(name, attributes)
        self.dropped = 0

    def _deadline(self, now: float) -> float | None:
        timeout = self.attrs["timeout"]
        return now + timeout / 1000 if timeout > 0 else None

    def start(self, now: float) -> Step:
        return Step(deadline=self._deadline(now))

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        self.dropped += len(data)
        note = "dropping data" if self.dropped == len(data) else None
        return Step(deadline=self._deadline(arrive), note=note)

    def expire(self, now: float) -> Step:
        note = f"closed after {self.attrs['timeout']} ms without data"
        return Step((self._emit(now, End("close", self.name)),), note=note)


class ResetPeer(Stage):
    """On the first chunk or end, wait ``timeout`` ms, then end the link with a TCP RST."""

    def _first(self, at: float) -> Step:
        timeout = max(self.attrs["timeout"], 0)
        note = f"reset in {timeout} ms"
        return Step((self._emit(at + timeout / 1000, End("reset", self.name)),), note=note)

    def _end(self, end: End, at: float) -> Step:
        return self._first(at)

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        return self._first(arrive)


class LimitData(Stage):
    """Forward at most ``bytes`` bytes on the link, then close it (count survives updates)."""

    def __init__(self, name: str, attributes: Mapping[str, int], sent: int = 0) -> None:
        super().__init__(name, attributes)
        self.sent = sent

    def _data(self, data: bytes, arrive: float, rng: Random) -> Step:
        room = max(self.attrs["bytes"] - self.sent, 0)
        out = [self._emit(arrive, data[:room])] if room and data else []
        self.sent += min(room, len(data))
        if self.attrs["bytes"] - self.sent > 0:
            return Step(tuple(out))
        out.append(self._emit(arrive, End("close", self.name)))
        return Step(tuple(out), note=f"limit of {self.attrs['bytes']} bytes reached")


_STAGES: Mapping[str, type[Stage]] = MappingProxyType(
    {
        "noop": Stage,
        "latency": Latency,
        "bandwidth": Bandwidth,
        "slow_close": SlowClose,
        "timeout": Timeout,
        "reset_peer": ResetPeer,
        "slicer": Slicer,
        "limit_data": LimitData,
    }
)


def make_stage(toxic: Toxic, previous: Stage | None = None) -> Stage:
    """A fresh stage for ``toxic``; ``previous`` (same toxic, before an update) hands on state.

    Raises:
        InvalidRequestError: ``toxic.type`` is not a Toxiproxy toxic type.
    """
    try:
        kind = _STAGES[toxic.type]
    except KeyError as exc:
        raise InvalidRequestError("invalid toxic type") from exc
    if kind is LimitData and isinstance(previous, LimitData):
        return LimitData(toxic.name, toxic.attributes, previous.sent)
    return kind(toxic.name, toxic.attributes)
