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
    """The nodes end at once, without warning (SIGKILL): outcome ``killed``."""

    kind: Literal["kill"]
    needs: ClassVar[frozenset[str]] = frozenset({KILL})

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            if _kill(world, record, node):
                ctx.finish(node, "killed", "killed by the harness (SIGKILL)")
            record.end = record.start


def _kill(world: World, record: FaultRecord, node: int) -> bool:
    """Kill ``node``, counting it when it was running."""
    killed = world.kill(node)
    if killed:
        record.count("nodes killed")
    return killed


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
        if self.on == "started" and self.on_node == node and self.after == 0 and node in self.nodes:
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
    """The nodes end (SIGKILL) and start again after ``duration`` (0 by default)."""

    kind: Literal["restart"]
    needs: ClassVar[frozenset[str]] = frozenset({KILL, RESTART})

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            _kill(world, record, node)
            later = ctx.now() + (self.duration or 0.0)
            ctx.start_at(node, later, partial(record.count, "nodes restarted"))
            record.end = later


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
