""":class:`EventCollector`: a ``logging.Handler`` that keeps rdzv's structured events.

Apart from :mod:`rdzv.events` so that importing rdzv imports no :mod:`logging`; reached as
``rdzv.events.EventCollector``.
"""

from __future__ import annotations

import logging
from typing import Any

from rdzv.events import EVENT_ATTR

__all__ = ["EventCollector"]


class EventCollector(logging.Handler):
    """A logging handler that keeps the structured payload of every rdzv event it sees."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, EVENT_ATTR, None)
        if isinstance(payload, dict):
            self.events.append(dict(payload, t=record.created))
