"""What a scenario run produces: node events, node outcomes, fault records, violations.

These are plain data shared by the runner (which produces them), ``checks`` (which judges
them) and :mod:`harness.report` (which renders them). Times are seconds since the scenario's
start on the monotonic clock. :class:`FaultRecord` is the fault kinds' own
(:mod:`harness.scenario.faults.record`), here too for readers of reports.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from harness.scenario.faults.record import FaultRecord
from harness.scenario.model import Scenario

__all__ = ["FaultRecord", "NodeEvent", "NodeOutcome", "PartOutcome", "Report", "Violation"]


@dataclass(frozen=True)
class NodeEvent:
    """One thing a node did (``started``, ``connect_attempt``, ``joined``, ...); ``part``:
    which part of the node did it (``"node"``: the whole node; a job's ``"agent"`` or
    ``"worker 3"``, see :mod:`harness.world.messages`)."""

    node: int
    t: float
    event: str
    fields: dict[str, Any] = field(default_factory=dict)
    part: str = "node"


@dataclass(frozen=True)
class PartOutcome:
    """How one part of a job node ended (``agent``, ``worker N``; docs/jobs.md).

    Attributes:
        finished: when it said so (seconds since the release).
        exitcode: its exit code (a worker's; the agent's 0 or 1; None: unknown).
        rank: a worker's RANK, the agent's group rank.
        world_size: a worker's WORLD_SIZE, the agent's group world size.
        result: a worker's all-reduce result.
        restarts: the agent's restarts; a worker's: the attempt it ran in.
        membership_restarts: how many of the agent's restarts were for a membership change
            (other agents waited to rendezvous; not counted against ``--max-restarts``).
    """

    node: int
    part: str
    status: str
    finished: float | None = None
    exitcode: int | None = None
    rank: int | None = None
    world_size: int | None = None
    result: float | None = None
    restarts: int | None = None
    membership_restarts: int | None = None
    error_class: str | None = None
    message: str | None = None


@dataclass
class NodeOutcome:
    """How one node ended.

    Attributes:
        status: one of :data:`harness.scenario.model.OUTCOMES`.
        started: when its process started (None if it never did).
        began: when it saw the release and began its rendezvous, as the node itself said
            (its last incarnation; None if it never got there): ``began - started`` is
            how long it took to launch.
        finished: when it reported its outcome, was killed, or was found hung.
        elapsed: ``finished - started`` of its last incarnation.
        seen_ranks: ranks whose key it found in the shared store after its rendezvous
            returned (None when it never got that far, or ``seen_all_but`` says).
        seen_all_but: on a rank other than 0, rank 0's word: rank 0 found the key of every
            rank below ``world_size`` but these (None: it got no word).
        output: the tail of what the process wrote to stdout/stderr (None if nothing).
        placement: how the world ran the node, in free text the reports show (e.g.
            ``"process"``, ``"packed 512 per process (threads)"``); None when the world
            does not say. Nodes with the same text are shown as one group, so a world
            gives every node placed the same way the same text.
        shutdown_error: ``Class: text`` when its handler's ``shutdown()`` raised after the
            rendezvous (None: it shut down cleanly, or never got a handler).
    """

    node: int
    status: str
    rank: int | None = None
    world_size: int | None = None
    run_id: str | None = None
    error_class: str | None = None
    message: str | None = None
    started: float | None = None
    finished: float | None = None
    pid: int | None = None
    events: list[NodeEvent] = field(default_factory=list)
    shared_store_ok: bool | None = None
    seen_ranks: list[int] | None = None
    seen_all_but: list[int] | None = None
    output: str | None = None
    maxrss_kib: int | None = None
    placement: str | None = None
    began: float | None = None
    shutdown_error: str | None = None
    #: A job node's parts (agent, workers), each with its own outcome; empty otherwise.
    parts: list[PartOutcome] = field(default_factory=list)

    @property
    def elapsed(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started


@dataclass(frozen=True)
class Violation:
    """A failed check: which check, what was wrong, which nodes.

    ``known`` marks a break the scenario records as the backend's own behaviour
    (``[backends.<name>] violates``): it is shown, but does not fail the run.
    """

    check: str
    message: str
    nodes: tuple[int, ...] = ()
    known: bool = False


@dataclass
class Report:
    """Everything one scenario run produced."""

    scenario: Scenario
    seed: int
    outcomes: list[NodeOutcome]
    faults: list[FaultRecord] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    duration: float = 0.0
    proxy_events: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: Why it was not run (None: it ran).
    skipped: str | None = None
    #: The world that could not run it (a fault needs what the world lacks, or this
    #: machine cannot host the world); None: the backend could not (``[backends.<name>]
    #: unsupported``, torch missing).
    skipped_by_world: str | None = None
    #: Stopped by Ctrl-C before it ended: its nodes were killed and nothing was judged.
    interrupted: bool = False
    #: Seconds from the start of the world's build (proxies, namespaces, a Ray world's
    #: placement group and actors) to the release of the nodes (all ready at the start
    #: gate); ``duration`` and every time in the report count from the release.
    startup: float | None = None
    #: Seconds from the first to the last node to see the release, among the nodes released
    #: together (None: fewer than two of them).
    release_skew: float | None = None
    #: The command that judges a rerun as this report was judged: ``harness run``, or
    #: ``harness replay`` when a check only the fuzzer's replay applies failed.
    rerun_with: str = "harness run"
    #: What the rerun command needs before it (``PYTHONPATH=DIR `` for a ``module:factory``
    #: backend; set by :func:`harness.run.suite.run_one`).
    rerun_env: str = ""

    @property
    def skip_reason(self) -> str | None:
        """Why it was not run, naming the cause: ``not run on <backend>: why`` when the
        backend could not run it, ``not run: the <world> world cannot ...`` when the world
        could not (None: it ran)."""
        if self.skipped is None:
            return None
        world = self.skipped_by_world
        if world is None:
            return f"not run on {self.scenario.backend}: {self.skipped}"
        if f"the {world} world" in self.skipped:
            return f"not run: {self.skipped}"
        return f"not run in the {world} world: {self.skipped}"

    @property
    def unexpectedly_idle(self) -> list[FaultRecord]:
        """The faults that never acted although the scenario does not expect them idle
        (informational: not a failed check). Not :attr:`Scenario.idle_faults
        <harness.scenario.model.Scenario.idle_faults>`, the faults it expects idle."""
        return [f for f in self.faults if f.flagged]

    @property
    def problems(self) -> list[Violation]:
        """The violations that fail the run (every one not recorded as known)."""
        return [v for v in self.violations if not v.known]

    @property
    def passed(self) -> bool:
        return not self.problems and self.error is None and not self.interrupted

    @property
    def replay_command(self) -> str:
        """The command that reruns this scenario with the same seed."""
        path = self.scenario.path or f"<{self.scenario.name}>"
        command = f"{self.rerun_env}{self.rerun_with} {shlex.quote(path)} --seed {self.seed}"
        if self.rerun_with != "harness run":  # replay runs the file as it is written
            return command
        # Only what an option changed: the file sets the rest itself.
        for key, value in self.scenario.options().items():
            if value is not None:  # an option cannot unpack a file's pack
                command += f" --{key} {shlex.quote(str(value))}"
        return command
