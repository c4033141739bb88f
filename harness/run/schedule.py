"""The runner's schedule: actions to run at a time (seconds since the start), in order.

One thread (the runner's) adds and runs actions; actions at the same time run in the order
they were added.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Schedule"]


@dataclass(order=True)
class _Action:
    t: float
    seq: int
    what: Callable[[], None] = field(compare=False)


class Schedule:
    """Actions by due time."""

    def __init__(self) -> None:
        self._queue: list[_Action] = []
        self._seq = itertools.count()

    def at(self, t: float, what: Callable[[], None]) -> None:
        """Run ``what`` once ``t`` is reached."""
        heapq.heappush(self._queue, _Action(t, next(self._seq), what))

    def next_due(self) -> float | None:
        """When the earliest action is due (None: nothing is scheduled)."""
        return self._queue[0].t if self._queue else None

    def run_due(self, now: Callable[[], float]) -> None:
        """Run every action due by ``now()`` (asked again after each action, so actions an
        action schedules for now run too)."""
        while self._queue and self._queue[0].t <= now():
            heapq.heappop(self._queue).what()
