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

rdzv is a library: its top logger ``rdzv`` has a :class:`logging.NullHandler`, so with logging
unconfigured nothing reaches stderr (not even warnings); an application that configures
logging sees each record as a line: the event's name and its ``message`` when it has one
(``exit_wait_ended: rank 3 did not call shutdown() ...``), else its fields as
``name=value`` (``member_lost run_id='job-1' round=0 rank=0 ... lost_rank=2``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

__all__ = ["EVENT_ATTR", "EventCollector", "emit"]

EVENT_ATTR: Final = "rdzv_event"

# Output is the application's choice: no "last resort" lines from a library.
logging.getLogger("rdzv").addHandler(logging.NullHandler())


def emit(logger: logging.Logger, event: str, level: int = logging.DEBUG, **fields: Any) -> None:
    """Log ``event`` on ``logger`` as a structured record (cheap when nobody listens)."""
    if logger.isEnabledFor(level):
        payload = {"event": event, **fields}
        message = fields.get("message")
        if isinstance(message, str):
            logger.log(level, "%s: %s", event, message, extra={EVENT_ATTR: payload})
        else:
            shown = " ".join(f"{name}={value!r}" for name, value in fields.items())
            logger.log(level, "%s %s", event, shown, extra={EVENT_ATTR: payload})


class EventCollector(logging.Handler):
    """A logging handler that keeps the structured payload of every rdzv event it sees."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, EVENT_ATTR, None)
        if isinstance(payload, dict):
            self.events.append(dict(payload, t=record.created))
