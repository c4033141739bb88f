"""Structured events: what rdzv did, as log records a harness can collect.

Every event is an ordinary :mod:`logging` record on a logger under ``rdzv`` whose message
is the event name and whose ``rdzv_event`` attribute is a dict: ``{"event": name, **fields}``.
Collect them with :class:`EventCollector` (a ``logging.Handler``) or any handler that reads
``record.rdzv_event``. Fields are plain JSON-friendly values (str, int, float, bool, None).

Event names used by rdzv:

* ``connect_attempt`` (store client): ``endpoint``, ``attempt``, ``error`` (None on success)
* ``connected`` (store client): ``endpoint``, ``attempts``, ``elapsed``
* ``server_listening`` (store server): ``endpoint``, ``addresses``
* ``bind_fallback`` (store server): ``host``, ``reason``, ``addresses``
* rendezvous events (``joined``, ``complete``, ``failed``, ...) are documented in
  :mod:`rdzv.rendezvous.static`.
"""

from __future__ import annotations

import logging
from typing import Any, Final

__all__ = ["EVENT_ATTR", "EventCollector", "emit"]

EVENT_ATTR: Final = "rdzv_event"


def emit(logger: logging.Logger, event: str, level: int = logging.DEBUG, **fields: Any) -> None:
    """Log ``event`` on ``logger`` as a structured record (cheap when nobody listens)."""
    if logger.isEnabledFor(level):
        payload = {"event": event, **fields}
        logger.log(level, "%s %s", event, fields, extra={EVENT_ATTR: payload})


class EventCollector(logging.Handler):
    """A logging handler that keeps the structured payload of every rdzv event it sees."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, EVENT_ATTR, None)
        if isinstance(payload, dict):
            self.events.append(dict(payload, t=record.created))
