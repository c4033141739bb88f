"""The start gate of a node: it waits there, ready, until the world releases every node at
once (:func:`wait_gate`: the world closes the one write end of a pipe all nodes wait on).
"""

from __future__ import annotations

import select
import time
from typing import Any

__all__ = ["open_gate", "process_gate", "wait_gate"]


def open_gate() -> float:
    """No gate: the node goes on at once; returns now (monotonic)."""
    return time.monotonic()


def wait_gate(gate: Any) -> float:
    """Block until the start gate opens; returns when this node saw it open (monotonic).

    The world closes the gate pipe's write end, and every node waiting on its read end
    ``gate`` (a connection or a descriptor) wakes on that one close. A gate already open
    does not block.
    """
    fd = gate if isinstance(gate, int) else gate.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while not poller.poll():  # pragma: no cover - woken without an event
        pass
    return time.monotonic()


def process_gate(gate: Any) -> float:
    """The start gate of a node that is its own process: :func:`wait_gate`, then straight
    on into its rendezvous (giving way there, with ``sched_yield``, made the noted times
    close and the rendezvous starts late: docs/reports.md, "Start-up and release skew")."""
    return wait_gate(gate)
