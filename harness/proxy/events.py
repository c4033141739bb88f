"""The fault proxy's event log: which toxic acted on which connection, and when.

An extension beyond Toxiproxy (which has no such record; users asked for it in
Shopify/toxiproxy#414). The log is bounded: once ``capacity`` events are held the oldest
are discarded and counted in ``dropped``. Sequence numbers start at 1 and never repeat, so
a reader polls with ``since=<last seq seen>``. Pure: the caller supplies the times.

:func:`toxic_effects` and :func:`link_cuts` read a log (in its JSON shape) back into what a
toxic or a disabled link did, for the report's "did this fault act?".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

__all__ = ["ACTED_EFFECTS", "Event", "EventLog", "ToxicEffects", "link_cuts", "toxic_effects"]

#: What an ``acted`` event of each toxic type means (counted once per connection). The
#: other types act through the close or reset they cause, which is counted instead.
ACTED_EFFECTS = {
    "latency": "connections delayed",
    "bandwidth": "connections throttled",
    "slicer": "connections sliced",
    "timeout": "connections black-holed",
    "slow_close": "closes delayed",
}


@dataclass(frozen=True, slots=True)
class Event:
    """One thing the proxy did.

    Attributes:
        seq: position in the log, from 1.
        time: seconds since the proxy server started (monotonic clock).
        wall: Unix time of the event (for lining up with other logs).
        proxy: proxy name.
        connection: per-proxy connection ordinal (from 1); 0 for proxy-wide events.
        stream: ``upstream``/``downstream``, or ``""`` for connection-wide events.
        toxic: toxic name, or ``""`` when no toxic is involved.
        action: a short verb, e.g. ``applied``, ``skipped``, ``reset``, ``closed``.
        detail: free text, e.g. the toxicity draw or the bytes involved.
    """

    seq: int
    time: float
    wall: float
    proxy: str
    connection: int
    stream: str
    toxic: str
    action: str
    detail: str

    def to_json(self) -> dict[str, object]:
        """The event as a JSON-ready dict (the API's shape)."""
        return asdict(self)


class EventLog:
    """A bounded, append-only list of :class:`Event` with monotonically increasing ``seq``."""

    def __init__(self, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError(f"event log capacity must be at least 1, got {capacity}")
        self._events: deque[Event] = deque(maxlen=capacity)
        self._next = 1
        self.dropped = 0

    def record(
        self,
        *,
        time: float,
        wall: float,
        proxy: str,
        action: str,
        connection: int = 0,
        stream: str = "",
        toxic: str = "",
        detail: str = "",
    ) -> Event:
        """Append one event and return it."""
        if len(self._events) == self._events.maxlen:
            self.dropped += 1
        event = Event(self._next, time, wall, proxy, connection, stream, toxic, action, detail)
        self._events.append(event)
        self._next += 1
        return event

    def since(self, seq: int = 0, proxy: str | None = None) -> list[Event]:
        """Events with ``seq`` greater than the given one, optionally of one proxy only."""
        return [e for e in self._events if e.seq > seq and (proxy is None or e.proxy == proxy)]

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest event ever recorded (0 when none)."""
        return self._next - 1

    def clear(self) -> None:
        """Forget every held event; sequence numbers keep increasing."""
        self._events.clear()


class ToxicEffects(NamedTuple):
    """What one toxic did according to the log (see :func:`toxic_effects`)."""

    effects: dict[str, int]
    applied: int
    skipped: int


def toxic_effects(events: Iterable[Mapping[str, Any]], toxic: str, toxic_type: str) -> ToxicEffects:
    """What the toxic named ``toxic`` did, according to the proxy's event log.

    Args:
        events: events of the proxies the toxic was added to (JSON shape, any order).
        toxic: the toxic's name.
        toxic_type: its type (``latency``, ``reset_peer``...).

    Returns:
        effect -> number of connections (``connections reset``, ``connections closed``, and
        the :data:`ACTED_EFFECTS` of its type); on how many connections its toxicity roll
        put it in place (``applied``) and on how many it did not (``skipped``).
    """
    hit: dict[str, set[tuple[str, int]]] = {}
    rolls: dict[str, set[tuple[str, int]]] = {"applied": set(), "skipped": set()}
    for event in events:
        if event["toxic"] != toxic:
            continue
        where = (str(event["proxy"]), int(event["connection"]))
        action = event["action"]
        label = {"reset": "connections reset", "closed": "connections closed"}.get(action)
        if action == "acted":
            label = ACTED_EFFECTS.get(toxic_type)
        elif action in rolls:
            rolls[action].add(where)
        if label is not None:
            hit.setdefault(label, set()).add(where)
    effects = {label: len(where) for label, where in hit.items()}
    return ToxicEffects(effects, len(rolls["applied"]), len(rolls["skipped"] - rolls["applied"]))


def link_cuts(events: Iterable[Mapping[str, Any]], proxy: str) -> list[int]:
    """How many open connections each disabling of ``proxy`` cut, in order.

    The proxy logs a ``closed`` event (detail ``proxy disabled``) for each connection it
    drops, then ``disabled``.
    """
    cuts: list[int] = []
    pending = 0
    for event in sorted(events, key=lambda e: int(e["seq"])):
        if event["proxy"] != proxy:
            continue
        if event["action"] == "closed" and event["detail"] == "proxy disabled":
            pending += 1
        elif event["action"] == "disabled":
            cuts.append(pending)
            pending = 0
    return cuts
