"""What the runner lends a fault while it acts: :class:`FaultContext`.

It implements :class:`harness.scenario.faults.base.Context` over the run's services
(:class:`Services`): its clock and schedule, its node book, the records and tallies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from harness.errors import HarnessError
from harness.run.model import NodeEvent, PartOutcome
from harness.run.schedule import Schedule
from harness.scenario.faults.base import Fault
from harness.scenario.faults.record import FaultRecord
from harness.scenario.format import Nodes
from harness.scenario.model import Scenario
from harness.world.base import Launch
from harness.world.messages import Outcome

__all__ = ["FaultContext", "NodeState", "PendingStart", "Services"]


@dataclass
class PendingStart:
    """A start of a node the schedule holds: when, for which fault, what to call then."""

    t: float
    owner: int  # the index of the fault that asked for it
    started: list[Callable[[], None]] = field(default_factory=list)


@dataclass
class NodeState:
    """What the runner knows of one node: its events; the outcome it reported (or the
    runner gave it: hung, killed, an exit); when it was launched; when it saw the release
    and where it runs (from its last ``Started``)."""

    events: list[NodeEvent] = field(default_factory=list)
    outcome: Outcome | None = None
    started: float | None = None
    began: float | None = None
    placement: str | None = None
    finished: float | None = None
    status: str | None = None
    pending: PendingStart | None = None
    incarnation: int = 0
    launch: Launch | None = None
    #: A job node's parts' outcomes, of its last incarnation.
    parts: list[PartOutcome] = field(default_factory=list)
    #: How many pauses hold an incarnation of the node (part None) or a part of it still.
    holds: dict[tuple[int, str | None], int] = field(default_factory=dict)

    @property
    def pending_start(self) -> bool:
        """A start of the node is scheduled (a late start, or a restart's)."""
        return self.pending is not None


class Services(Protocol):
    """The parts of a run a fault's context uses."""

    @property
    def sc(self) -> Scenario: ...
    @property
    def starting(self) -> bool: ...
    @property
    def schedule(self) -> Schedule: ...
    @property
    def nodes(self) -> Mapping[int, NodeState]: ...
    @property
    def records(self) -> list[FaultRecord]: ...
    @property
    def tallies(self) -> list[Callable[[], None]]: ...
    def now(self) -> float: ...
    def finish(self, node: int, status: str, message: str) -> None: ...
    def start_at(
        self, node: int, t: float, started: Callable[[], None], owner: int
    ) -> int | None: ...
    def cancel_start(self, node: int) -> int | None: ...
    def never_start(self, nodes: Sequence[int]) -> int: ...


class FaultContext:
    """The context of fault ``index`` in one run
    (:class:`~harness.scenario.faults.base.Context`)."""

    def __init__(self, run: Services, index: int, fault: Fault) -> None:
        self._run = run
        self._index = index
        self._fault = fault
        #: The record the fault made (exactly one).
        self.made: FaultRecord | None = None

    @property
    def index(self) -> int:
        return self._index

    @property
    def host(self) -> str:
        return self._run.sc.endpoint.host

    def targets(self, nodes: Nodes) -> list[int]:
        return self._run.sc.targets(nodes)

    def now(self) -> float:
        return self._run.now()

    def record(self, nodes: Sequence[int], detail: str) -> FaultRecord:
        """Make the fault's record.

        Raises:
            HarnessError: the fault already made one (a bug in its kind).
        """
        if self.made is not None:
            raise HarnessError(f"fault[{self._index}] ({self._fault.kind}) made two records")
        start = 0.0 if self._run.starting else self._run.now()
        self.made = FaultRecord(
            self._index, self._fault.kind, list(nodes), start, None, detail, acted={}
        )
        self._run.records.append(self.made)
        return self.made

    def at(self, t: float, action: Callable[[], None]) -> None:
        self._run.schedule.at(t, action)

    def tally(self, count: Callable[[], None]) -> None:
        self._run.tallies.append(count)

    def finish(self, node: int, status: str, message: str) -> None:
        self._run.finish(node, status, message=message)

    def start_at(self, node: int, t: float, started: Callable[[], None]) -> int | None:
        return self._run.start_at(node, t, started, self._index)

    def pending_start(self, node: int) -> int | None:
        pending = self._run.nodes[node].pending
        return None if pending is None else pending.owner

    def cancel_start(self, node: int) -> int | None:
        return self._run.cancel_start(node)

    def never_start(self, nodes: Sequence[int]) -> int:
        return self._run.never_start(nodes)

    def hold(self, node: int, part: str | None) -> Callable[[], bool]:
        state = self._run.nodes[node]
        key = (state.incarnation, part)
        state.holds[key] = state.holds.get(key, 0) + 1

        def release() -> bool:
            state.holds[key] -= 1
            return state.holds[key] == 0 and state.incarnation == key[0]

        return release

    def launch(self, node: int) -> Launch | None:
        return self._run.nodes[node].launch

    def events(self, node: int) -> Sequence[NodeEvent]:
        return self._run.nodes[node].events
