"""What a job node runs and what it reports: picklable, standard library only.

A job node is a torchrun agent (in the node process) with ``nproc_per_node`` workers. It
has parts, each with stages and an outcome of its own: :data:`AGENT` and ``worker N``
(:func:`worker_part`, N the worker's local rank on its node).

Stages (each an event a fault can fire on):

============================ =========================================================
``rendezvous_done``  (agent)  the agent's ``next_rendezvous()`` returned: group rank,
                              group world size, the workers' store, restart count
``workers_started``  (agent)  the agent started its workers (their PIDs)
``restart``          (agent)  the agent restarts its worker group (the k-th:
                              ``restart``), for its ``cause``: ``failure`` or
                              ``membership`` (other agents wait to rendezvous; the k-th
                              such: ``membership_restarts``; torch does not count these
                              against ``--max-restarts``)
``pg_ready``         (worker) ``init_process_group`` returned: RANK, WORLD_SIZE
``collective_done``  (worker) the all-reduce returned (``result``)
``worker_failed``    (worker) the worker's script raised (``message``)
============================ =========================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "AGENT",
    "AGENT_STAGES",
    "JOB_BACKEND",
    "JOB_STAGES",
    "REPORT_ENV",
    "TORCH_JOB_MODULES",
    "WORKERS_STARTED",
    "WORKER_STAGES",
    "JobResult",
    "PartResult",
    "expected_sum",
    "failure_class",
    "worker_local_rank",
    "worker_part",
]

#: The part of a job node that is its torchrun agent.
AGENT: Final = "agent"
#: The environment variable that gives a worker the path of its node's stage socket.
REPORT_ENV: Final = "HARNESS_JOB_REPORT"
#: The agent's stage that says its workers' PIDs (``pids``, by local rank).
WORKERS_STARTED: Final = "workers_started"
AGENT_STAGES: Final = ("rendezvous_done", WORKERS_STARTED, "restart")
WORKER_STAGES: Final = ("pg_ready", "collective_done", "worker_failed")
#: Every stage a job reports (events faults can fire on).
JOB_STAGES: Final = AGENT_STAGES + WORKER_STAGES
#: The name under which a world's ``Layout.backends`` asks for job nodes (torch's agent,
#: launcher and rendezvous handlers preloaded: :data:`TORCH_JOB_MODULES`).
JOB_BACKEND: Final = "torchrun-job"
#: What a job node imports before its start gate.
TORCH_JOB_MODULES: Final = (
    "torch.distributed.launcher.api",
    "torch.distributed.elastic.agent.server.local_elastic_agent",
    "torch.distributed.elastic.rendezvous.registry",
    "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
    "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend",
)


def worker_part(local_rank: int) -> str:
    """The part name of a node's worker ``local_rank``."""
    return f"worker {local_rank}"


def worker_local_rank(part: str) -> int | None:
    """The local rank of a part named ``worker N`` (None: not a worker's name)."""
    head, _, number = part.partition(" ")
    if head != "worker" or not number.isdigit():
        return None
    return int(number)


_TIMEOUT: Final = re.compile(r"timed out|timeout", re.IGNORECASE)
_CONNECTION: Final = re.compile(r"connection|refused|reset by peer|closed by peer", re.IGNORECASE)


def failure_class(message: str, error_class: str | None) -> str:
    """The outcome class of a worker that failed with ``message`` (and ``error_class``):
    ``timeout`` when it says it timed out (gloo's ``Timed out waiting ... for send
    operation``), ``connection_error`` for a ``DistNetworkError`` or a message about a
    connection (gloo's ``Connection closed by peer``, ``Connection reset by peer``), else
    ``error``. The node classes its workers so, and ``harness from-log`` classes the
    workers' errors of a log the same way (what it expects of a replay's workers)."""
    if _TIMEOUT.search(message):
        return "timeout"
    if "DistNetworkError" in (error_class or "") or _CONNECTION.search(message):
        return "connection_error"
    return "error"


def expected_sum(world_size: int) -> float:
    """What the default worker's all-reduce of ``rank + 1`` gives in a world of that size."""
    return world_size * (world_size + 1) / 2


@dataclass(frozen=True)
class PartResult:
    """How one part of a job node ended.

    Attributes:
        part: :data:`AGENT` or ``worker N``.
        status: ``ok``, or how it failed (the node's classes: ``timeout``,
            ``connection_error``, ``closed``, ``error``), or ``killed``.
        exitcode: the worker's exit code (None: unknown); the agent's is 0 or 1.
        rank: the worker's RANK, or the agent's group rank (None: never got one).
        world_size: the worker's WORLD_SIZE, or the agent's group world size.
        result: the worker's all-reduce result (None: none).
        restarts: the agent's restarts of its worker group (workers: the restart count
            they ran in).
        membership_restarts: how many of the agent's restarts were for a membership change
            (other agents waited to rendezvous; torch does not count them against
            ``--max-restarts``).
        error_class: the qualified class of what it failed with.
        message: what it failed with.
    """

    part: str
    status: str
    exitcode: int | None = None
    rank: int | None = None
    world_size: int | None = None
    result: float | None = None
    restarts: int | None = None
    error_class: str | None = None
    message: str | None = None
    membership_restarts: int | None = None


@dataclass(frozen=True)
class JobResult:
    """Every part's result of one job node: the agent first, then the workers."""

    parts: tuple[PartResult, ...]

    @property
    def agent(self) -> PartResult:
        return self.parts[0]

    @property
    def workers(self) -> tuple[PartResult, ...]:
        return self.parts[1:]
