"""What a scenario from a log will hold: :class:`Plan` and its :class:`PlannedFault` s
(each part with the reason and the log lines it came from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.logs.lines import Line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from harness.logs.facts import Facts

__all__ = ["ANY", "LATE", "MAX_NODES", "RACE", "RACED", "Plan", "PlannedFault", "plan_time"]

#: The most nodes a scenario from a log gets (one machine holds 1024 node processes).
MAX_NODES = 1024
#: The expectation of a node the log does not show: any outcome but never started.
ANY = "any"
#: The outcomes of a node whose store request went unanswered until the round's deadline,
#: which it shares with the store host (they began together): it times out, or the host
#: gives up first and closes its connection, a matter of milliseconds either way.
RACED = ("timeout", "connection_error")
#: That expectation, as :attr:`Plan.expect` holds it.
RACE = "|".join(RACED)
LATE = 0.5  # seconds (scaled) after the first node that make a node late


@dataclass
class PlannedFault:
    """A ``[[fault]]`` entry with the reason and the lines it came from."""

    entry: dict[str, Any]
    why: str
    lines: list[Line] = field(default_factory=list)


@dataclass
class Plan:
    """Everything the scenario file will hold, and what could not be reproduced."""

    nodes: int
    join: float
    scale: float
    faults: list[PlannedFault] = field(default_factory=list)
    overrides: list[PlannedFault] = field(default_factory=list)
    expect: dict[int, str] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    endpoint_host: str | None = None
    world: str = "local"
    assumptions: list[str] = field(default_factory=list)
    not_reproduced: list[str] = field(default_factory=list)
    #: The nodes whose end must name the missing ranks (as their log's did).
    name_missing: set[int] = field(default_factory=set)
    #: The node whose key was never published (its rank is missing), if any.
    held: int | None = None
    #: A job scenario's ``[job]`` table (None: a plain rendezvous) and its
    #: ``[[expect.parts]]`` entries.
    job: dict[str, Any] | None = None
    #: The hard deadline, when the default (2 x join + 15 s) is too short (a job's).
    hard: float | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    #: Why the ``[job]`` table holds what it does (an empty entry each, with its lines).
    job_why: list[PlannedFault] = field(default_factory=list)

    def faulted(
        self, kind: str | None = None, action: str | None = None, besides: str | None = None
    ) -> set[int]:
        """The nodes a planned fault names (of ``kind`` and ``action`` when given, of any kind
        but ``besides``)."""
        return {
            node
            for f in self.faults
            if kind in (None, f.entry["kind"])
            and action in (None, f.entry.get("action"))
            and f.entry["kind"] != besides
            for node in (f.entry.get("nodes") or [])
            if isinstance(node, int)
        }


def plan_time(plan: Plan, facts: Facts, when: float | None) -> float | None:
    """``when`` (the log's clock) as the scenario's seconds: from the first node's first
    line, scaled, to 0.1 s."""
    starts = [n.first for n in facts.nodes if n.first is not None]
    if when is None or not starts:
        return None
    return round(max(0.0, (when - min(starts)) * plan.scale), 1)
