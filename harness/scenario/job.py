"""The ``[job]`` table and ``[[expect.parts]]``: a scenario whose nodes are torchrun jobs.

``[job]`` makes every node a torchrun agent (in the node process) with ``nproc_per_node``
gloo workers that ``init_process_group`` and all-reduce -- or run ``script`` (a path
relative to the scenario file) instead. Its keys are torchrun's (``max_restarts``,
``monitor_interval``) and the harness's bounds (``exit_barrier_timeout``,
``process_group_timeout``: torch's defaults, 300 s and 30 min, would outlive any run; both
default to the join timeout).

``[[expect.parts]]`` says what a part of some nodes must report: ``part`` is ``agent``,
``workers`` (each of them) or ``worker N``; ``outcome`` one or several of
:data:`PART_OUTCOMES`; ``message`` a pattern; ``exitcode``; ``restarts`` (the agent's
restarts, for a failure or a membership change; one count or a list meaning "any of these").

Imports: pydantic, :mod:`harness.scenario.format`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator

from harness.scenario.format import FormatModel, JobStage, Nodes, one_or_more, pattern

__all__ = ["JOB_STAGES", "PART_OUTCOMES", "Job", "PartExpect", "fault_parts"]

#: The stages a job's parts report, events a fault can fire on (``on = "pg_ready"``).
JOB_STAGES: tuple[str, ...] = get_args(JobStage)
PartOutcome = Literal[
    "ok", "timeout", "connection_error", "closed", "state_error", "error", "stopped", "killed"
]
#: What one part of a job node can report.
PART_OUTCOMES: tuple[str, ...] = get_args(PartOutcome)
Count = Annotated[int, Field(ge=0)]


class Job(FormatModel):
    """The ``[job]`` table (see the module doc)."""

    nproc_per_node: int = Field(default=1, ge=1, le=64)
    script: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    max_restarts: int = Field(default=0, ge=0, le=100)
    monitor_interval: float = Field(default=0.2, gt=0, le=60)
    #: None: the join timeout (the others' workers wait as long as a node may take to join).
    exit_barrier_timeout: float | None = Field(default=None, gt=0)
    #: None: the join timeout.
    process_group_timeout: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    #: False: torchrun started without ``--rdzv-endpoint`` (each node falls back to its own
    #: host: docs/jobs.md, "Without an endpoint").
    endpoint: bool = True
    #: The address an agent advertises (torchrun's ``--local-addr``; torch's c10d makes rank
    #: 0's store listen there and names it to the others). None: the world's choice -- in
    #: the netns world the node's own address; elsewhere torch's default, the host's name.
    #: ``"localhost"`` reproduces a host name that resolves to loopback (F20).
    local_addr: str | None = Field(default=None, min_length=1)

    def problems(self, hard_deadline: float) -> list[str]:
        """Bounds a run's hard deadline must exceed, one line each (``job.<key>: ...``)."""
        found = []
        for key in ("exit_barrier_timeout", "process_group_timeout"):
            value = getattr(self, key)
            if value is not None and value >= hard_deadline:
                found.append(
                    f"job.{key}: got {value:g}; the hard deadline ({hard_deadline:g} s) must "
                    "be greater, or the job's nodes are killed and reported hung first; "
                    "lower it or raise timeouts.hard"
                )
        return found


class PartExpect(FormatModel):
    """What one part of some nodes must report (see the module doc)."""

    nodes: Nodes
    part: str = Field(pattern=r"^(agent|workers|worker \d+)$")
    outcome: PartOutcome | tuple[PartOutcome, ...] | None = None
    message: str | None = None
    exitcode: int | None = None
    restarts: Count | tuple[Count, ...] | None = None

    @field_validator("outcome", "restarts", mode="before")
    @classmethod
    def _outcomes(cls, value: Any) -> Any:
        return one_or_more(value)

    @field_validator("message")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        return pattern(value)

    @property
    def outcomes(self) -> tuple[str, ...] | None:
        """The outcomes it accepts (None: any)."""
        if self.outcome is None:
            return None
        return (self.outcome,) if isinstance(self.outcome, str) else tuple(self.outcome)

    @property
    def allowed_restarts(self) -> tuple[int, ...] | None:
        """The restart counts it accepts (None: any)."""
        if self.restarts is None:
            return None
        return (self.restarts,) if isinstance(self.restarts, int) else tuple(self.restarts)

    def names(self, part: str) -> bool:
        """Whether ``part`` (``agent``, ``worker N``) is one this entry's ``part`` names."""
        return self.part == part or (self.part == "workers" and part.startswith("worker "))


def fault_parts(job: Job | None, faults: Sequence[tuple[int, object]]) -> list[str]:
    """Faults aimed at a part (``part = "agent"``, ``"worker N"``) that no node has: the
    scenario has no ``[job]``, or fewer workers per node; one line each."""
    found = []
    for index, fault in faults:
        part = getattr(fault, "part", None)
        if part in (None, "node"):
            continue
        where = f"fault[{index}].part"
        if job is None:
            found.append(
                f"{where}: {part!r} is a part of a job node and the scenario has no [job] "
                "table; drop 'part' to aim at the whole node"
            )
            continue
        head, _, number = str(part).partition(" ")
        if head == "worker" and int(number) >= job.nproc_per_node:
            found.append(
                f"{where}: {part!r} does not exist; each node has {job.nproc_per_node} "
                f"worker(s) (job.nproc_per_node): worker 0..{job.nproc_per_node - 1}"
            )
    return found
