"""The fault-kind base class: a kind owns its keys, their checks and its effect.

A fault kind is a frozen pydantic model -- its fields are the keys of a ``[[fault]]`` table
of that ``kind`` -- with hooks the loader and the runner call. Nothing else in the harness
knows a kind by name:

* keys and their validation: the model's fields and validators;
* :meth:`Fault.check`: problems only the whole scenario shows (node 0 targeted, ...);
* :attr:`Fault.needs`: the world capabilities it uses (:mod:`harness.world.base`): a world
  without them cannot run the scenario, which is then reported unsupported;
* :meth:`Fault.shape`: what the world must build for it (a squatter, a store interposer);
* :meth:`Fault.prepare`: how it changes a node's launch (e.g. start it paused);
* :meth:`Fault.when`: when it acts: a :class:`Trigger` (a time, or a node's event), or
  ``None``: at start-up, before any node starts;
* :meth:`Fault.inject`: acts on the world, makes and fills in its record (what it did), and
  returns the heal that undoes it (``None``: nothing to undo);
* :meth:`Fault.lasts`: after how many seconds the runner heals it (``None``: it holds to
  the end; the world's teardown removes what is left);
* :meth:`Fault.draw` (for the fuzzer): a hypothesis strategy of the kind's tables for a
  scenario of a given :class:`~harness.scenario.faults.fuzzing.Outline` (``None``: the kind
  is not drawn);
* :meth:`Fault.effect` (for the fuzzer's oracle): what the fault may do to the outcomes
  (:class:`~harness.scenario.faults.fuzzing.Effect`).

A new kind subclasses :class:`Fault` (or :class:`Timed`, for the ``at``/``on``/``after``
keys) and is registered in :data:`harness.scenario.faults.registry.FAULTS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import Field, model_validator

from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.faults.record import FaultRecord
from harness.scenario.format import FormatModel, Nodes, TriggerEvent
from harness.world.base import Launch, Layout, World

if TYPE_CHECKING:  # hypothesis is imported only inside draw() (by the fuzzer)
    from hypothesis.strategies import SearchStrategy

__all__ = ["Context", "EndpointView", "Event", "Fault", "Heal", "Timed", "Trigger", "Whole"]

#: Undoes what a fault did (the second verb of its pair).
Heal = Callable[[], None]


class Event(Protocol):
    """One thing a node did, as the runner recorded it (``t``: seconds since the start)."""

    @property
    def t(self) -> float: ...
    @property
    def event(self) -> str: ...
    @property
    def fields(self) -> dict[str, Any]: ...


class Context(Protocol):
    """What the runner lends one fault in one run, besides the world."""

    @property
    def index(self) -> int:
        """The fault's position in the file (``fault[index]``)."""

    @property
    def host(self) -> str:
        """The endpoint host the nodes are told."""

    def targets(self, nodes: Nodes) -> list[int]:
        """A node selector resolved against the scenario's node count."""

    def now(self) -> float:
        """Seconds since the run started."""

    def record(self, nodes: Sequence[int], detail: str) -> FaultRecord:
        """Make this fault's record (once), starting now (0 at start-up)."""

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Run ``action`` on the scheduler at ``t`` seconds since the start."""

    def tally(self, count: Callable[[], None]) -> None:
        """Run ``count`` when the run is over (nodes ended, world torn down): the time to
        read what the world counted into the record."""

    def finish(self, node: int, status: str, message: str) -> None:
        """Give the node its outcome now (unless it has one)."""

    def start_at(self, node: int, t: float, started: Callable[[], None]) -> int | None:
        """Start the node (again) at ``t`` instead of with the others, then call
        ``started``. Before the nodes start, a node's last ``start_at`` wins (None).

        A node is one incarnation at a time: while a start of it is pending (a late
        start, or a restart's), another ``start_at`` merges with it -- the node starts
        once, at the later of the two times, and both ``started`` are called.

        Returns:
            The index of the fault whose pending start this one merged with (None: the
            start is this fault's own).
        """

    def pending_start(self, node: int) -> int | None:
        """The index of the fault whose start of the node is pending (None: none is)."""

    def cancel_start(self, node: int) -> int | None:
        """Cancel the pending start of a node that ran before (a restart's replacement,
        not a first start); the index of the fault that asked for it (None: none was
        pending)."""

    def never_start(self, nodes: Sequence[int]) -> int:
        """Keep ``nodes`` from starting (outcome ``absent``); how many were not already."""

    def hold(self, node: int, part: str | None) -> Callable[[], bool]:
        """Count one more pause holding the node's current incarnation (or its ``part``)
        still. Returns its release: it ends this hold and says whether the pause is to
        resume the node now -- no other pause holds that incarnation, and it is still the
        node's (pauses that overlap hold a node until the last one ends)."""

    def launch(self, node: int) -> Launch | None:
        """How the node's current incarnation was launched (None: not yet)."""

    def events(self, node: int) -> Sequence[Event]:
        """What the node did so far, in order."""


class EndpointView(Protocol):
    """What a check may read of ``[endpoint]``."""

    @property
    def host(self) -> str: ...
    @property
    def via_proxy(self) -> bool: ...


@dataclass(frozen=True)
class Whole:
    """What a fault's :meth:`~Fault.check` may know of the whole scenario.

    Attributes:
        count: how many nodes the scenario has.
        endpoint: its ``[endpoint]`` (None when that table is invalid: skip its checks).
        faults: every valid fault with its index in the file.
        absent: the nodes that never start.
    """

    count: int
    endpoint: EndpointView | None
    faults: Sequence[tuple[int, Fault]]
    absent: frozenset[int]


@dataclass(frozen=True)
class Trigger:
    """When a fault acts: ``at`` seconds after the start, or ``after`` seconds past the
    event ``on`` of node ``on_node``."""

    at: float = 0.0
    on: str | None = None
    on_node: int | None = None
    after: float = 0.0


class Fault(FormatModel):
    """The base of every fault kind; see the module docstring for the hooks."""

    kind: str
    #: The world capabilities the kind uses (:data:`harness.world.base.CAPABILITIES`).
    needs: ClassVar[frozenset[str]] = frozenset()

    @property
    def label(self) -> str:
        """How ``harness list`` names the fault: its kind, and what sets it apart."""
        return self.kind

    def check(self, index: int, whole: Whole) -> list[str]:
        """Problems only the whole scenario shows, one line each (``fault[i]...: ...``)."""
        return []

    @classmethod
    def where_key_goes(cls, key: str, table: Mapping[str, Any]) -> str | None:
        """Where ``key``, unknown in a ``[[fault]]`` table of this kind (``table``), belongs
        instead, when the kind knows (e.g. a toxic's attribute: in its ``attributes``)."""
        return None

    def never_starts(self) -> frozenset[int]:
        """The nodes this fault keeps from ever starting."""
        return frozenset()

    def shape(self, layout: Layout) -> Layout:
        """The layout the world must build for this fault (before anything starts)."""
        return layout

    def prepare(self, launch: Launch) -> Launch:
        """How a node is launched, with this fault in the scenario."""
        return launch

    def when(self) -> Trigger | None:
        """When the fault acts; ``None``: at start-up, before any node starts."""
        return None

    def lasts(self) -> float | None:
        """Seconds after which the runner heals the fault (``None``: never)."""
        return None

    def inject(self, world: World, ctx: Context) -> Heal | None:
        """Act on ``world``; make the fault's record with ``ctx.record`` and count into it
        what the fault did (now, or in a ``ctx.tally``).

        Returns:
            What undoes it, called after :meth:`lasts` seconds or at the end of the run,
            whichever comes first; ``None`` when there is nothing to undo.
        """
        raise NotImplementedError(f"fault kind {self.kind!r} does not say what it does")

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """A hypothesis strategy of this kind's ``[[fault]]`` tables (plain dicts) valid in a
        scenario of ``outline``, or ``None``: the kind is not drawn there (the default: a kind
        is fuzzed once it says how). Import hypothesis inside (:mod:`.draws`)."""
        return None

    def effect(self, outline: Outline) -> Effect:
        """What this fault may do to the outcomes of a scenario of ``outline`` (the default:
        any of the open ones, ``ok``, ``timeout`` and ``connection_error``)."""
        return Effect()


class Timed(Fault):
    """A fault that acts during the run: ``at`` seconds after the start, or ``after``
    seconds past node ``on_node``'s event ``on``."""

    at: float | None = Field(default=None, ge=0)
    on: TriggerEvent | None = None
    on_node: int | None = Field(default=None, ge=0)
    after: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one_trigger(self) -> Timed:
        if self.on is not None and self.at is not None:
            raise ValueError("give either 'at' (seconds) or 'on' (an event), not both")
        if self.on is not None and self.on_node is None:
            raise ValueError("'on' needs 'on_node': the node whose event triggers the fault")
        if self.on is None and self.on_node is not None:
            raise ValueError("'on_node' needs 'on': the event to wait for")
        return self

    def when(self) -> Trigger:
        return Trigger(self.at or 0.0, self.on, self.on_node, self.after)
