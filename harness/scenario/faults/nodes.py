"""Fault kinds on the nodes themselves: ``kill``, ``pause``, ``restart`` during the run;
``absent`` and ``late_start`` at start-up."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import ClassVar, Literal

from pydantic import Field

from harness.scenario.faults.base import Context, Fault, Heal, Timed, Whole
from harness.scenario.faults.checks import reaches_started_nodes
from harness.scenario.faults.record import FaultRecord
from harness.world.base import KILL, PAUSE, RESTART, Launch, World

__all__ = ["AbsentFault", "KillFault", "LateStartFault", "PauseFault", "RestartFault"]

_RESUME_TRIES = 3
_RESUME_AGAIN = 0.2  # seconds between tries


class _OnNodes(Timed):
    """A fault on the nodes it names (which must start)."""

    nodes: list[int]
    duration: float | None = Field(default=None, gt=0)

    def check(self, index: int, whole: Whole) -> list[str]:
        return reaches_started_nodes(index, whole, self.kind, self.nodes)


class KillFault(_OnNodes):
    """The nodes end at once, without warning (SIGKILL): outcome ``killed``.

    A node down with a restart pending (a restart's replacement not started yet) stays
    down: the kill cancels that start (one incarnation at a time; the record says so).
    """

    kind: Literal["kill"]
    needs: ClassVar[frozenset[str]] = frozenset({KILL})

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            if _kill(world, record, node):
                ctx.finish(node, "killed", "killed by the harness (SIGKILL)")
            else:
                owner = ctx.cancel_start(node)
                if owner is not None:
                    record.count(f"restarts cancelled (fault[{owner}]'s: the node stays down)")
                    why = f"killed by the harness while down (fault[{owner}]'s restart cancelled)"
                    ctx.finish(node, "killed", why)
            record.end = record.start


def _kill(world: World, record: FaultRecord, node: int) -> bool:
    """Kill ``node``, counting it when it was running."""
    killed = world.kill(node)
    if killed:
        record.count("nodes killed")
    return killed


def _down(ctx: Context, node: int) -> str:
    """Why a process fault found ``node`` not running, when a start of it is pending."""
    owner = ctx.pending_start(node)
    return "" if owner is None else f"node {node} was down, fault[{owner}]'s start pending"


class PauseFault(_OnNodes):
    """The nodes freeze (SIGSTOP), and go on (SIGCONT) after ``duration``.

    Triggered by a node's own ``started`` event with no ``after``, that node is launched
    paused: it freezes itself before doing anything, so nothing races the pause.
    """

    kind: Literal["pause"]
    needs: ClassVar[frozenset[str]] = frozenset({PAUSE})

    def lasts(self) -> float | None:
        return self.duration

    def prepare(self, launch: Launch) -> Launch:
        node = launch.node
        own = self.on == "started" and self.on_node == node and self.after == 0
        if own and node in self.nodes and launch.incarnation == 1:  # it fires once
            return dataclasses.replace(launch, start_paused=True)
        return launch

    def inject(self, world: World, ctx: Context) -> Heal:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            launch = ctx.launch(node)
            if self.on == "started" and launch is not None and launch.start_paused:
                # (a node paused at start stops itself; a pause from here could land before
                # its own and be undone first, leaving it stopped for good)
                record.count("nodes paused")
            elif world.pause(node):
                record.count("nodes paused")
            else:
                record.note = "; ".join(filter(None, [record.note, _down(ctx, node)]))

        def heal() -> None:
            for node in targets:
                _resume(world, ctx, node, _RESUME_TRIES)

        return heal


def _resume(world: World, ctx: Context, node: int, tries: int) -> None:
    """Resume, and again shortly after while the node still shows as paused (a node that
    pauses itself at start may do so after the first resume arrived)."""
    world.resume(node)
    if tries > 1 and world.paused(node):
        ctx.at(ctx.now() + _RESUME_AGAIN, partial(_resume, world, ctx, node, tries - 1))


class RestartFault(_OnNodes):
    """The nodes end (SIGKILL) and start again after ``duration`` (0 by default).

    One incarnation at a time: a restart of a node down with a start pending (another
    restart's, or a late start) merges with it -- no second replacement: the node starts
    once, at the later of the two times (the record names the fault merged with).
    """

    kind: Literal["restart"]
    needs: ClassVar[frozenset[str]] = frozenset({KILL, RESTART})

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            _kill(world, record, node)
            record.end = later = ctx.now() + (self.duration or 0.0)
            replacement = _Replacement(ctx, record)
            owner = ctx.start_at(node, later, replacement)
            if owner is not None:
                replacement.merged = True
                record.count(f"restarts merged with fault[{owner}]'s (the node starts once)")


@dataclasses.dataclass
class _Replacement:
    """Called when a restart's replacement starts: when, and (unless merged) a count."""

    ctx: Context
    record: FaultRecord
    merged: bool = False  # the start is another fault's: counted there

    def __call__(self) -> None:
        self.record.end = max(self.record.end or 0.0, self.ctx.now())
        if not self.merged:
            self.record.count("nodes restarted")


class AbsentFault(Fault):
    """The nodes never start: outcome ``absent``."""

    kind: Literal["absent"]
    nodes: list[int]

    def never_starts(self) -> frozenset[int]:
        return frozenset(self.nodes)

    def inject(self, world: World, ctx: Context) -> None:
        record = ctx.record(self.nodes, "never started")
        record.count("nodes never started", ctx.never_start(self.nodes))


class LateStartFault(Fault):
    """The nodes start ``delay`` seconds after the others."""

    kind: Literal["late_start"]
    nodes: list[int]
    delay: float = Field(gt=0)

    def check(self, index: int, whole: Whole) -> list[str]:
        return reaches_started_nodes(index, whole, self.kind, self.nodes)

    def inject(self, world: World, ctx: Context) -> None:
        record = ctx.record(self.nodes, f"start delayed by {self.delay:g} s")
        record.end = self.delay
        for node in self.nodes:
            ctx.start_at(node, self.delay, partial(record.count, "nodes started late"))
