"""The start of a run: wait until the nodes are ready at the start gate; how together they
saw the release.

The runner starts every node of the first batch (each says ``ready`` once it is up and waits
at the world's start gate), waits here until all are ready, then releases them with one
:meth:`~harness.world.base.World.release`. Each node's ``started`` event carries the time it
saw the release; :func:`release_skew` is the spread of those times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence

from harness.run.model import NodeEvent
from harness.world.base import Message

__all__ = ["await_ready", "ready_limit", "release_skew"]


def ready_limit(nodes: int) -> float:
    """How long the runner waits for ``nodes`` nodes to be ready before it releases them
    anyway (a liveness bound only: the late ones go on when they get there)."""
    return max(60.0, 0.2 * nodes)


def await_ready(
    inbox: list[Message],
    cond: threading.Condition,
    nodes: Collection[int],
    stop: threading.Event,
) -> list[Message]:
    """Wait until every node of ``nodes`` said ``ready`` (or ended, or ``stop`` is set, or
    :func:`ready_limit` passed), taking the messages from ``inbox`` (guarded by ``cond``).

    Returns:
        The other messages taken, in order, for the runner to handle after the release.
    """
    waiting = set(nodes)
    held: list[Message] = []
    limit = time.monotonic() + ready_limit(len(waiting))
    while waiting and time.monotonic() < limit and not stop.is_set():
        with cond:
            if not inbox:
                cond.wait(0.05)
            messages = inbox[:]
            inbox.clear()
        for message in messages:
            if message[0] == "event" and message[3] == "ready":
                waiting.discard(message[1])
                continue
            held.append(message)
            if message[0] != "event":  # it ended before it was ready
                waiting.discard(message[1])
    return held


def release_skew(events: Mapping[int, Sequence[NodeEvent]]) -> float | None:
    """First to last release as the nodes released together saw it (their first
    ``started`` event), from each node's ``events``; None when fewer than two saw it."""
    seen = []
    for node_events in events.values():
        started = [e.t for e in node_events if e.event == "started"]
        if started:
            seen.append(started[0])
    return max(seen) - min(seen) if len(seen) > 1 else None
