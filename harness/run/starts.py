"""The node starts the runner's schedule holds during a run: a node is one incarnation at a
time, so a node has at most one pending start.

A start asked for while another of the same node is pending merges with it: the node
starts once, at the later of the two times, and every ``started`` callback runs then. A
pending restart (the start of a node that ran before) can be cancelled: its node stays down.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from harness.run.context import NodeState, PendingStart
from harness.run.schedule import Schedule

__all__ = ["Starts"]


class Starts:
    """Pending starts of ``nodes`` on ``schedule``; ``start(node)`` starts one now."""

    def __init__(
        self, schedule: Schedule, nodes: Mapping[int, NodeState], start: Callable[[int], None]
    ) -> None:
        self._schedule = schedule
        self._nodes = nodes
        self._start = start

    def ask(self, node: int, t: float, started: Callable[[], None], owner: int) -> int | None:
        """Start ``node`` at ``t`` for fault ``owner``, then call ``started``; merged with a
        start of it already pending (then returns that start's owner; else None)."""
        pending = self._nodes[node].pending
        if pending is None:
            self.pend(node, t, started, owner)
            return None
        pending.started.append(started)
        if t > pending.t:
            pending.t = t
            self._schedule.at(t, partial(self._due, node, t))
        return pending.owner

    def pend(self, node: int, t: float, started: Callable[[], None], owner: int) -> None:
        """Schedule a start of ``node`` at ``t`` (none is pending)."""
        self._nodes[node].pending = PendingStart(t, owner, [started])
        self._schedule.at(t, partial(self._due, node, t))

    def cancel(self, node: int) -> int | None:
        """Cancel ``node``'s pending restart (not a first start); its owner, or None."""
        state = self._nodes[node]
        if state.pending is None or state.incarnation == 0:
            return None
        owner, state.pending = state.pending.owner, None
        return owner

    def _due(self, node: int, t: float) -> None:
        pending = self._nodes[node].pending
        if pending is None or pending.t != t:
            return  # cancelled, or moved later by a merged start
        self._start(node)
        for started in pending.started:
            started()
