"""What a scenario run produces: node events, node outcomes, fault windows, violations.

These are plain data shared by ``node``/``cluster`` (which produce them), ``checks`` (which
judge them) and ``report`` (which renders them). Times are seconds since the scenario's
start on the monotonic clock (shared by every process on the machine).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from harness.scenario import Scenario

__all__ = ["FaultRecord", "NodeEvent", "NodeOutcome", "Report", "Violation"]


@dataclass(frozen=True)
class NodeEvent:
    """One thing a node did (``started``, ``connect_attempt``, ``joined``, ...)."""

    node: int
    t: float
    event: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class NodeOutcome:
    """How one node ended.

    Attributes:
        status: one of :data:`harness.scenario.OUTCOMES`.
        started: when its process started (None if it never did).
        finished: when it reported its outcome, was killed, or was found hung.
        elapsed: ``finished - started`` of its last incarnation.
        seen_ranks: ranks whose key it found in the shared store after its rendezvous
            returned (None when it never got that far).
        output: the tail of what the process wrote to stdout/stderr (None if nothing).
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
    output: str | None = None
    maxrss_kib: int | None = None

    @property
    def elapsed(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started


@dataclass
class FaultRecord:
    """A fault as it was actually applied (for the timeline and for replay), and what it did.

    Attributes:
        acted: what the fault did, counted by whatever carried it out (the proxy's event
            log, the store-fault interposer, the DNS shim, the squatter, the runner for
            signals and starts): effect -> count, e.g. ``{"connections reset": 2}``. Empty
            when the fault never acted; ``None`` when its effects could not be counted
            (``uncounted`` says why, e.g. a real Toxiproxy keeps no event log). Whatever
            records a fault sets it to ``{}`` when it starts counting.
        note: what is known about a fault that did not act (e.g. how many connections it
            was in place on).
    """

    index: int
    kind: str
    nodes: list[int]
    start: float
    end: float | None = None
    detail: str = ""
    acted: dict[str, int] | None = None
    uncounted: str = ""
    note: str = ""

    def count(self, effect: str, n: int = 1) -> None:
        """Add ``n`` to the count of ``effect`` (``n`` of 0 records nothing)."""
        if n <= 0:
            return
        if self.acted is None:
            self.acted, self.uncounted = {}, ""
        self.acted[effect] = self.acted.get(effect, 0) + n

    def not_counted(self, why: str) -> None:
        """Mark the fault's effects as unknown, saying why."""
        self.acted, self.uncounted = None, why

    @property
    def idle(self) -> bool:
        """True when the fault's effects were counted and it did nothing."""
        return self.acted is not None and not any(self.acted.values())

    @property
    def effects(self) -> str:
        """What the fault did, in words: ``11 connections reset``, ``did not act (in place
        on 2 connections, ...)``, or why it was not counted."""
        if self.acted is None:
            return self.uncounted or "not counted"
        if self.idle:
            return f"did not act ({self.note})" if self.note else "did not act"
        return ", ".join(_counted(n, effect) for effect, n in self.acted.items() if n)


def _counted(n: int, effect: str) -> str:
    """``2 connections reset``; ``1 connection reset`` (the first plural word before any
    parenthesis is made singular)."""
    if n != 1:
        return f"{n} {effect}"
    head, paren, tail = effect.partition("(")
    words = head.split(" ")
    for i, word in enumerate(words):
        if word.endswith("s") and len(word) > 1:
            words[i] = word[:-1]
            break
    return f"1 {' '.join(words)}{paren}{tail}"


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
    skipped: str | None = None
    #: Stopped by Ctrl-C before it ended: its nodes were killed and nothing was judged.
    interrupted: bool = False

    @property
    def idle_faults(self) -> list[FaultRecord]:
        """The faults that never acted (informational: not a failed check)."""
        return [f for f in self.faults if f.idle]

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
        command = f"harness run {shlex.quote(path)} --seed {self.seed}"
        if self.scenario.backend != "static":
            command += f" --backend {shlex.quote(self.scenario.backend)}"
        return command
