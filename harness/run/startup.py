"""The start of a run: wait until the nodes are ready at the start gate; how together they
saw the release.

The runner starts every node of the first batch (each says ``ready`` once it is up, then
waits at the world's start gate), waits here until all are ready and asleep at the gate,
then releases them with one :meth:`~harness.world.base.World.release`. Each node's
``started`` event carries the time it saw the release; :func:`release_skew` is the spread of
those times.

Why asleep, and not only ready: a node says ``ready`` a moment before it blocks at the gate.
A node still runnable at the release (ready, not yet blocked) was seen to get its first turn
1.2 s after it, queued behind a thousand woken nodes on two cores (docs/reports.md,
"Start-up and release skew").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from harness.run.model import NodeEvent
from harness.world.messages import Message, Ready, ends

__all__ = ["asleep", "await_asleep", "await_ready", "ready_limit", "release_skew"]

#: How long to wait before looking again at the nodes not yet asleep (they need the CPU to
#: get there: the runner's thread gives it up meanwhile).
_NAP: Final = 0.002
#: The longest wait for every ready node to be asleep at the gate (a liveness bound only: a
#: node takes microseconds from ``ready`` to the gate once it has the CPU).
ASLEEP_LIMIT: Final = 5.0


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

    Then waits until the thread of every ready node is asleep (:func:`await_asleep`), as its
    :class:`~harness.world.messages.Ready` message names it (``pid`` and ``tid``).

    Returns:
        The other messages taken, in order, for the runner to handle after the release.
    """
    waiting = set(nodes)
    held: list[Message] = []
    at_gate: list[tuple[int, int]] = []
    limit = time.monotonic() + ready_limit(len(waiting))
    while waiting and time.monotonic() < limit and not stop.is_set():
        with cond:
            if not inbox:
                cond.wait(0.05)
            messages = inbox[:]
            inbox.clear()
        for message in messages:
            if isinstance(message, Ready):
                waiting.discard(message.node)
                at_gate.append((message.pid, message.tid))
                continue
            held.append(message)
            if ends(message):  # it ended before it was ready
                waiting.discard(message.node)
    if not stop.is_set():
        await_asleep(at_gate, stop)
    return held


def asleep(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of process ``pid`` is off the CPU's run queue (the kernel's
    state is not ``R``); True for a thread that is gone, or where ``/proc`` cannot say
    (another machine, another OS)."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
    except OSError:
        return True
    # "pid (comm) S ...": the command may hold spaces and parentheses; the state follows
    # the last ")".
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"R"


def await_asleep(
    threads: Iterable[tuple[int, int]], stop: threading.Event, limit: float = ASLEEP_LIMIT
) -> list[tuple[int, int]]:
    """Wait until every ``(pid, tid)`` of ``threads`` is :func:`asleep`, ``stop`` is set, or
    ``limit`` seconds passed.

    Returns:
        The threads still not asleep (empty when all are).
    """
    pending = list(threads)
    end = time.monotonic() + limit
    while True:
        pending = [thread for thread in pending if not asleep(*thread)]
        if not pending or time.monotonic() >= end or stop.wait(_NAP):
            return pending


def release_skew(events: Mapping[int, Sequence[NodeEvent]]) -> float | None:
    """First to last release as the nodes released together saw it (their first
    ``started`` event), from each node's ``events``; None when fewer than two saw it."""
    seen = []
    for node_events in events.values():
        started = [e.t for e in node_events if e.event == "started"]
        if started:
            seen.append(started[0])
    return max(seen) - min(seen) if len(seen) > 1 else None
