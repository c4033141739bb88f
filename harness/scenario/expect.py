"""What a scenario expects its nodes to report: ``[expect]`` and ``[[expect.nodes]]``.

The outcomes a node can report (:data:`OUTCOMES`), the invariant checks a backend may be
recorded as breaking (:data:`INVARIANTS`), and the frozen models of a file's expectations
(:class:`Expect`, :class:`NodeExpect`; a job's parts are :class:`~harness.scenario.job.PartExpect`).
:mod:`harness.scenario.model` holds them in a :class:`~harness.scenario.model.Scenario` and
re-exports these names; the reference is docs/scenarios.md.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator

from harness.scenario.format import FormatModel, Nodes, one_or_more, pattern
from harness.scenario.job import PartExpect

__all__ = [
    "INVARIANTS",
    "OUTCOMES",
    "Expect",
    "Invariant",
    "NodeExpect",
    "Outcome",
    "allowed_outcomes",
]

Outcome = Literal[
    "ok",
    "timeout",
    "connection_error",
    "state_error",
    "closed",
    "error",
    "killed",
    "hung",
    "absent",
]
#: Every outcome a node can report.
OUTCOMES: tuple[str, ...] = get_args(Outcome)
Invariant = Literal[
    "ranks",
    "world_size",
    "complete_round",
    "shared_store",
    "hung",
    # a job's (harness.run.job_checks)
    "job_ranks",
    "job_world_size",
    "collective",
]
#: Invariant checks (see :mod:`harness.run.checks`) a backend may be recorded as breaking.
INVARIANTS: tuple[str, ...] = get_args(Invariant)


def allowed_outcomes(outcome: Outcome | tuple[Outcome, ...]) -> tuple[str, ...]:
    """An expectation's outcome as the tuple of outcomes it accepts."""
    return (outcome,) if isinstance(outcome, str) else tuple(outcome)


class NodeExpect(FormatModel):
    """What some nodes must report (``outcome`` may list several allowed outcomes)."""

    nodes: Nodes
    outcome: Outcome | tuple[Outcome, ...]
    message: str | None = None

    @field_validator("outcome", mode="before")
    @classmethod
    def _outcomes(cls, value: Any) -> Any:
        return one_or_more(value)

    elapsed: tuple[float, float] | None = None

    @field_validator("elapsed", mode="before")
    @classmethod
    def _pair(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) != 2:
            raise ValueError("must be [low, high] in seconds")
        return value

    @field_validator("message")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        return pattern(value)

    @field_validator("elapsed")
    @classmethod
    def _bounds(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0 <= value[0] <= value[1]:
            raise ValueError("must be [low, high] with 0 <= low <= high")
        return value


class Expect(FormatModel):
    outcome: Outcome | tuple[Outcome, ...] = "ok"
    nodes: list[NodeExpect] = Field(default_factory=list)
    #: Indexes of the faults that must not act (a fault in place that the backend never
    #: gives cause to act: it is not warned about, and it fails the run if it acts).
    idle_faults: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    #: What parts of job nodes must report (``[[expect.parts]]``; a scenario with ``[job]``).
    parts: list[PartExpect] = Field(default_factory=list)
    #: The ``nodes`` of ``[[expect.nodes]]`` and ``[[expect.parts]]`` name the ranks the
    #: backend gave, not the scenario's node indexes (for a backend that ranks nodes in its
    #: own order, torch's c10d: by agent address and PID). A node the backend gave no rank
    #: is judged by ``outcome`` alone.
    by_rank: bool = False

    @field_validator("outcome", mode="before")
    @classmethod
    def _outcomes(cls, value: Any) -> Any:
        return one_or_more(value)
