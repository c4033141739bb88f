"""The fault proxy's event log: which toxic acted on which connection, and when.

An extension beyond Toxiproxy (which has no such record; users asked for it in
Shopify/toxiproxy#414). The log is bounded: once ``capacity`` events are held the oldest
are discarded and counted in ``dropped``. Sequence numbers start at 1 and never repeat, so
a reader polls with ``since=<last seq seen>``. Pure: the caller supplies the times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass

__all__ = ["Event", "EventLog"]


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
