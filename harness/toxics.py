"""Pure toxic logic with Toxiproxy's names, attributes and semantics (no I/O, no clock).

A *toxic* (:class:`Toxic`) is the API-level description: name, type, stream, toxicity and
integer attributes, validated the way Toxiproxy 2.x validates them (:func:`new_toxic`,
:func:`updated_toxic`, :func:`toxic_json`).

A *stage* (:class:`Stage`, from :func:`make_stage`) is one toxic acting on one link (one
direction of one connection). Stages work in *virtual time*: each item handed to
:meth:`Stage.push` carries the time it reached the stage, and the stage answers with the
items it passes on, each stamped with the time it leaves (``due``), plus an optional
deadline at which :meth:`Stage.expire` must be called. Randomness comes only from the
``rng`` argument. The relay (``harness.relay``) turns due times into real waits.

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
from collections.abc import Container, Mapping
from dataclasses import dataclass
from random import Random
from types import MappingProxyType
from typing import Literal, NamedTuple

from harness.errors import AlreadyExistsError, InvalidRequestError

__all__ = [
    "STREAMS",
    "TOXIC_ATTRIBUTES",
    "End",
    "Stage",
    "Step",
    "Toxic",
    "make_stage",
    "new_toxic",
    "roll",
    "slice_bounds",
    "toxic_json",
    "updated_toxic",
]

STREAMS = ("upstream", "downstream")
TOXIC_ATTRIBUTES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "noop": (),
        "latency": ("latency", "jitter"),
        "bandwidth": ("rate",),
        "slow_close": ("delay",),
        "timeout": ("timeout",),
        "reset_peer": ("timeout",),
        "slicer": ("average_size", "size_variation", "delay"),
        "limit_data": ("bytes",),
    }
)
_INT64 = 2**63
_BAD_STREAM = "stream was invalid, can be either upstream or downstream"
_JSON_NAMES: Mapping[type, str] = MappingProxyType(
    {str: "string", float: "number", bool: "boolean"}
)


@dataclass(frozen=True)
class Toxic:
    """A validated toxic as the API shows it; ``stream`` keeps the caller's casing."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: Mapping[str, int]

    @property
    def direction(self) -> str:
        """``"upstream"`` or ``"downstream"``, whatever the casing of ``stream``."""
        return self.stream.lower()


def _field(body: Mapping[str, object], key: str, kind: type, default: object) -> object:
    value = body.get(key)
    if value is None:
        return default
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise InvalidRequestError(
            f"bad request body: field {key!r} must be a {_JSON_NAMES[kind]}, got {value!r:.80}"
        )
    return value


def _object(body: object, what: str) -> Mapping[str, object]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequestError(
            f"bad request body: {what} must be a JSON object, got {body!r:.80}"
        )
    return body


def _attributes(
    toxic_type: str, raw: object, current: Mapping[str, int]
) -> MappingProxyType[str, int]:
    values = dict(current)
    for key, value in _object(raw, "attributes").items():
        if key not in TOXIC_ATTRIBUTES[toxic_type]:
            continue  # Toxiproxy (Go encoding/json) ignores unknown attribute keys
        number = int(value) if isinstance(value, float) and value.is_integer() else value
        if (
            not isinstance(number, int)
            or isinstance(number, bool)
            or not -_INT64 <= number < _INT64
        ):
            where = f"attribute {key!r} of a {toxic_type} toxic"
            raise InvalidRequestError(
                f"bad request body: {where} must be an integer, got {value!r}"
            )
        values[key] = number
    return MappingProxyType(values)


def new_toxic(body: object, *, existing_names: Container[str]) -> Toxic:
    """Validate a toxic-creation request body, in Toxiproxy's order of checks.

    Args:
        body: the decoded JSON body.
        existing_names: names already used by toxics of the same proxy (either stream).

    Returns:
        The toxic, with Toxiproxy's defaults (stream ``downstream``, toxicity 1, name
        ``<type>_<stream>``, attributes 0).

    Raises:
        InvalidRequestError: wrong field types, bad stream, unknown type, bad attributes.
        AlreadyExistsError: the (possibly defaulted) name is taken.
    """
    fields = _object(body, "a toxic")
    name = _field(fields, "name", str, "")
    toxic_type = _field(fields, "type", str, "")
    stream = _field(fields, "stream", str, "downstream")
    toxicity = _field(fields, "toxicity", float, 1.0)
    assert isinstance(name, str) and isinstance(toxic_type, str) and isinstance(stream, str)
    assert isinstance(toxicity, float)
    if stream.lower() not in STREAMS:
        raise InvalidRequestError(_BAD_STREAM)
    name = name or f"{toxic_type}_{stream}"
    if toxic_type not in TOXIC_ATTRIBUTES:
        raise InvalidRequestError("invalid toxic type")
    if name in existing_names:
        raise AlreadyExistsError("toxic already exists")
    zeros = dict.fromkeys(TOXIC_ATTRIBUTES[toxic_type], 0)
    attributes = _attributes(toxic_type, fields.get("attributes"), zeros)
    return Toxic(name, toxic_type, stream, toxicity, attributes)


def updated_toxic(toxic: Toxic, body: object) -> Toxic:
    """Apply an update body: only ``attributes`` (merged) and ``toxicity`` change.

    Raises:
        InvalidRequestError: the body or one of its fields has the wrong type.
    """
    fields = _object(body, "a toxic update")
    toxicity = _field(fields, "toxicity", float, toxic.toxicity)
    assert isinstance(toxicity, float)
    attributes = _attributes(toxic.type, fields.get("attributes"), toxic.attributes)
    return Toxic(toxic.name, toxic.type, toxic.stream, toxicity, attributes)


def toxic_json(toxic: Toxic) -> dict[str, object]:
    """The toxic as Toxiproxy serialises it (integral toxicity printed as an integer)."""
    toxicity: float = toxic.toxicity
    if toxicity.is_integer() and abs(toxicity) < _INT64:
        toxicity = int(toxicity)
    return {
        "attributes": dict(toxic.attributes),
        "name": toxic.name,
        "type": toxic.type,
        "stream": toxic.stream,
        "toxicity": toxicity,
    }


def roll(toxicity: float, rng: Random) -> bool:
    """Toxiproxy's toxicity draw: the toxic acts on a link when ``rng.random() < toxicity``."""
    return rng.random() < toxicity


# --------------------------------------------------------------------------- stages


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
