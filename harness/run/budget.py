"""What a scenario costs the machine, and how many can run at once (``harness run -j``).

A scenario's cost is its node count: every node is a rendezvous that wants CPU at the same
moment as the others (a process, or a thread of a packed process), and a process node also
holds a few MiB. The machine holds :func:`capacity` nodes at once: ``NODES_PER_CORE`` per
core, and no more than its memory allows at ``MIB_PER_NODE``. The suite starts a scenario
only when the scenarios already running and it together fit (:class:`Budget`); one that
does not fit even alone runs alone. So on 2 cores two 1024-node scenarios never share the
machine, while small ones run ``-j`` at a time.

``-j auto`` (:func:`auto_jobs`) runs as many scenarios at once as there are cores.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Final

import psutil

from harness.scenario.model import Scenario

__all__ = ["MIB_PER_NODE", "NODES_PER_CORE", "Budget", "auto_jobs", "capacity", "cores", "cost"]

#: Nodes one core carries at once (1024 on 2 cores: one scale scenario at a time).
NODES_PER_CORE: Final = 512
#: Memory one node process takes (its PSS is about 5 MiB; packed nodes take less).
MIB_PER_NODE: Final = 8
_MIB: Final = 1024 * 1024


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def capacity(cpus: int | None = None, memory: int | None = None) -> int:
    """How many nodes the machine runs at once: ``NODES_PER_CORE`` per core of ``cpus``
    (default: :func:`cores`), at most ``memory`` bytes (default: available now) /
    ``MIB_PER_NODE``; never less than one node."""
    cpus = cores() if cpus is None else cpus
    memory = psutil.virtual_memory().available if memory is None else memory
    return max(1, min(NODES_PER_CORE * cpus, memory // (MIB_PER_NODE * _MIB)))


def cost(scenario: Scenario) -> int:
    """What running ``scenario`` costs: its nodes."""
    return scenario.nodes


def auto_jobs(cpus: int | None = None) -> int:
    """``-j auto``: one scenario per core (the :class:`Budget` keeps heavy ones apart)."""
    return cores() if cpus is None else max(1, cpus)


class Budget:
    """The nodes running now, against a capacity; scenarios wait here, in turn, for room.

    Scenarios start in the order they asked (a small one never overtakes a large one that
    waits for room, so the large one cannot starve).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition()
        self._tickets = itertools.count()
        self._turn = 0

    def acquire(self, amount: int, stop: threading.Event, poll: float = 0.2) -> bool:
        """Wait for this caller's turn and until ``amount`` fits beside what runs (or
        nothing runs), then take it.

        Returns:
            False, without taking anything, when ``stop`` was set first.
        """
        with self._cond:
            ticket = next(self._tickets)
            try:
                while ticket != self._turn or (self.used and self.used + amount > self.limit):
                    if stop.is_set():
                        return False
                    self._cond.wait(poll)
                if stop.is_set():
                    return False
                self.used += amount
                return True
            finally:
                if ticket == self._turn:  # taken or given up: the next one's turn
                    self._turn += 1
                    self._cond.notify_all()

    def release(self, amount: int) -> None:
        """Give ``amount`` back (a scenario ended)."""
        with self._cond:
            self.used -= amount
            self._cond.notify_all()
