"""Fault kinds on the nodes themselves: ``kill``, ``pause``, ``restart`` during the run;
``absent`` and ``late_start`` at start-up.

``kill``, ``pause`` and ``restart`` take ``part``: the whole node (the default, ``node``),
or on a job node its torchrun ``agent`` alone (its workers end by their death signal, as
torch's do) or one ``worker N`` (its agent sees it fail; a restart of a worker is its
agent's: ``job.max_restarts``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from harness.scenario.faults.base import Context, Fault, Heal, Timed, Whole
from harness.scenario.faults.checks import reaches_started_nodes
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.faults.record import FaultRecord
from harness.scenario.format import part_name
from harness.world.base import KILL, PAUSE, RESTART, Launch, World

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["AbsentFault", "KillFault", "LateStartFault", "PauseFault", "RestartFault"]

_RESUME_TRIES = 3
_RESUME_AGAIN = 0.2  # seconds between tries


class _OnNodes(Timed):
    """A fault on the nodes it names (which must start)."""

    nodes: list[int]
    duration: float | None = Field(default=None, gt=0)
    #: The part of a job node it acts on (None or ``node``: the whole node).
    part: str | None = None

    @field_validator("part")
    @classmethod
    def _part(cls, value: str | None) -> str | None:
        return part_name(value)

    @property
    def one_part(self) -> str | None:
        """The part it acts on alone (None: the whole node)."""
        return None if self.part in (None, "node") else self.part

    @property
    def label(self) -> str:
        return self.kind if self.one_part is None else f"{self.kind} ({self.one_part})"

    def check(self, index: int, whole: Whole) -> list[str]:
        return reaches_started_nodes(index, whole, self.kind, self.nodes)


class KillFault(_OnNodes):
    """The nodes end at once, without warning (SIGKILL): outcome ``killed``.

    A node down with a restart pending (a restart's replacement not started yet) stays
    down: the kill cancels that start (one incarnation at a time; the record says so).
    """

    kind: Literal["kill"]
    needs: ClassVar[frozenset[str]] = frozenset({KILL})

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]]:
        """One node that starts, killed at a time or on a node's event."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import trigger

        node = st.sampled_from(outline.present).map(lambda n: [n])
        return st.tuples(node, trigger(outline)).map(
            lambda found: {"kind": "kill", "nodes": found[0], **found[1]}
        )

    def effect(self, outline: Outline) -> Effect:
        return Effect.killing(self.nodes)

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "" if self.one_part is None else f"its {self.one_part}")
        for node in targets:
            if self.one_part is not None and self.one_part != "agent":
                if world.kill_part(node, self.one_part):  # its agent sees the worker fail
                    record.count("workers killed")
                record.end = record.start
                continue
            if _kill(world, record, node, self.one_part):
                ctx.finish(node, "killed", _killed(self.one_part))
            else:
                owner = ctx.cancel_start(node)
                if owner is not None:
                    record.count(f"restarts cancelled (fault[{owner}]'s: the node stays down)")
                    why = f"killed by the harness while down (fault[{owner}]'s restart cancelled)"
                    ctx.finish(node, "killed", why)
            record.end = record.start


def _kill(world: World, record: FaultRecord, node: int, agent: str | None = None) -> bool:
    """Kill ``node`` (or its ``agent`` alone), counting it when it was running."""
    killed = world.kill(node) if agent is None else world.kill_part(node, agent)
    if killed:
        record.count("nodes killed" if agent is None else "agents killed")
    return killed


def _killed(part: str | None) -> str:
    if part is None:
        return "killed by the harness (SIGKILL)"
    return "its agent killed by the harness (SIGKILL); its workers end by their death signal"


def _down(ctx: Context, node: int) -> str:
    """Why a process fault found ``node`` not running, when a start of it is pending."""
    owner = ctx.pending_start(node)
    return "" if owner is None else f"node {node} was down, fault[{owner}]'s start pending"


class PauseFault(_OnNodes):
    """The nodes freeze (SIGSTOP), and go on (SIGCONT) after ``duration``.

    Triggered by a node's own ``started`` event with no ``after``, that node is launched
    paused: it freezes itself before doing anything, so nothing races the pause. Pauses
    that overlap on a node hold it until the last one ends (``Context.hold``).
    """

    kind: Literal["pause"]
    needs: ClassVar[frozenset[str]] = frozenset({PAUSE})

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]]:
        """One node that starts, paused for 0.2 s up to 1.5 join timeouts: from its very
        start (launched paused) or from a time or a node's event."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import built, tenths, trigger

        def make(draw: st.DrawFn) -> dict[str, Any]:
            node = draw(st.sampled_from(outline.present))
            fault = {"kind": "pause", "nodes": [node]}
            duration = draw(tenths(0.2, 1.5 * outline.join))
            if draw(st.booleans()):  # frozen from its very start (see docs/scenarios.md)
                return {**fault, "on": "started", "on_node": node, "duration": duration}
            return {**fault, "duration": duration, **draw(trigger(outline))}

        return built(make)

    def effect(self, outline: Outline) -> Effect:
        """Its nodes may take ``duration`` longer (a pause without one holds them to the
        end: the run's hard deadline reports them hung)."""
        return Effect(holds=dict.fromkeys(self.nodes, self.duration or 0.0))

    def lasts(self) -> float | None:
        return self.duration

    def prepare(self, launch: Launch) -> Launch:
        node = launch.node
        own = self.on == "started" and self.on_node == node and self.after == 0
        own = own and self.one_part is None  # a part is paused when it runs
        if own and node in self.nodes and launch.incarnation == 1:  # it fires once
            return dataclasses.replace(launch, start_paused=True)
        return launch

    def inject(self, world: World, ctx: Context) -> Heal:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        part = self.one_part
        # each node it holds, with the release of its hold: pauses that overlap on a node
        # hold it until the last one ends, and none resumes a replacement it never paused
        held: dict[int, Callable[[], bool]] = {}
        if part is not None:
            for node in targets:
                if world.pause_part(node, part):
                    record.count(f"{part.split()[0]}s paused")
                    held[node] = ctx.hold(node, part)

            def heal_part() -> None:
                for node, release in held.items():
                    if release():
                        world.resume_part(node, part)

            return heal_part
        for node in targets:
            launch = ctx.launch(node)
            if self.on == "started" and launch is not None and launch.start_paused:
                # (a node paused at start stops itself; a pause from here could land before
                # its own and be undone first, leaving it stopped for good)
                record.count("nodes paused")
                held[node] = ctx.hold(node, None)
            elif world.pause(node):
                record.count("nodes paused")
                held[node] = ctx.hold(node, None)
            else:
                record.note = "; ".join(filter(None, [record.note, _down(ctx, node)]))

        def heal() -> None:
            for node, release in held.items():
                if release():
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

    @field_validator("part")
    @classmethod
    def _whole_or_agent(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("worker"):
            raise ValueError(
                f"got {value!r}; a worker is restarted by its agent (job.max_restarts): "
                "kill it (kind = 'kill', part = 'worker N'), or restart the 'agent' or "
                "the whole 'node'"
            )
        return value

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """A worker restarted 0-0.3 s after its own ``joined``, 0.1-1 s later (node 0's
        replacement would need the store's port again: never node 0)."""
        if not outline.workers:
            return None
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import tenths

        return st.tuples(st.sampled_from(outline.workers), tenths(0, 0.3), tenths(0.1, 1.0)).map(
            lambda found: {
                "kind": "restart",
                "nodes": [found[0]],
                "on": "joined",
                "on_node": found[0],
                "after": found[1],
                "duration": found[2],
            }
        )

    def effect(self, outline: Outline) -> Effect:
        """A replacement arriving after its round ended fails with ``state_error`` (when
        node 0 hosts a store at all)."""
        allows = {} if 0 in outline.absent else dict.fromkeys(self.nodes, ("state_error",))
        return Effect(allows=allows, restarts=frozenset(self.nodes))

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        record = ctx.record(targets, "")
        for node in targets:
            _kill(world, record, node, self.one_part)
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

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """Some nodes no other fault needs, never every node; at most one such fault."""
        keepable = outline.keepable
        most = min(len(keepable), len(outline.present) - 1)
        if outline.absent or most < 1:
            return None
        from harness.scenario.faults.draws import subset

        return subset(keepable, max_size=most).map(lambda n: {"kind": "absent", "nodes": n})

    def effect(self, outline: Outline) -> Effect:
        """Nothing but :meth:`never_starts`, which the oracle reads."""
        return Effect(harmless=True)

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

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]]:
        """Some nodes that start, late by 0.1 s up to a quarter of the join timeout (harmless)
        or by half of it up to 1.5 times it."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import subset, tenths

        join = outline.join
        delay = st.one_of(tenths(0.1, join / 4), tenths(join / 2, 1.5 * join))
        return st.tuples(subset(outline.present), delay).map(
            lambda found: {"kind": "late_start", "nodes": found[0], "delay": found[1]}
        )

    def effect(self, outline: Outline) -> Effect:
        """Harmless up to a quarter of the join timeout."""
        return Effect(harmless=self.delay <= outline.join / 4)

    def inject(self, world: World, ctx: Context) -> None:
        record = ctx.record(self.nodes, f"start delayed by {self.delay:g} s")
        record.end = self.delay
        for node in self.nodes:
            ctx.start_at(node, self.delay, partial(record.count, "nodes started late"))
