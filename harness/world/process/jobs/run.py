"""Run one job node in the node process: torch's agent, its workers, their stages.

:func:`run_job` is called after the start gate opened (torch already imported: see
:func:`import_torch`). It starts a :class:`~.stages.StageListener`, gives the workers its
path, the agent's PID and the process group's timeout in their environment, runs torch's
``launch_agent`` with the node's :func:`~.agent.launch_config` and the reporting agent, and
hands every stage (the agent's and the workers') to ``sink`` as it happens. It returns one
:class:`~.spec.JobResult`, never raises.

How each part's result is judged:

* the agent: ``ok`` when ``launch_agent`` returned; when its workers failed (torch's
  ``ChildFailedError``) ``error``, naming each failed worker's exit code; when the
  rendezvous failed, the node's class of that error (``timeout``, ``closed``,
  ``connection_error``, ...);
* a worker: its exit code from torch's failure record (0 when the agent succeeded; None
  when torch recorded nothing); ``ok`` with exit code 0; ``stopped`` when it said no
  failure of its own and ended by a signal or was never recorded (its agent stopped the
  group: another part failed); else ``error`` (or ``timeout`` / ``connection_error`` when
  its own failure said so: a timeout in its message, torch's ``DistNetworkError`` or a
  connection in its message), with the message it reported (``worker_failed``) or torch's.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from harness.world.process.jobs import worker as worker_module
from harness.world.process.jobs.agent import install, launch_config, reporting_agent
from harness.world.process.jobs.spec import (
    AGENT,
    REPORT_ENV,
    TORCH_JOB_MODULES,
    JobResult,
    PartResult,
    failure_class,
    worker_part,
)
from harness.world.process.jobs.stages import StageListener, StageSink
from harness.world.process.reporting import classify
from harness.world.process.torch_backends import HandlerArgs
from harness.world.specs import JobSpec

__all__ = ["import_torch", "run_job"]


def import_torch() -> float:
    """Import what a job node runs (before the start gate); the seconds it took (none
    when its forkserver preloaded them: a job's world asks for that, ``JOB_BACKEND``)."""
    import importlib

    began = time.monotonic()
    for module in TORCH_JOB_MODULES:
        importlib.import_module(module)
    return time.monotonic() - began


@dataclass
class _Seen:
    """What the stages told of each worker (the latest attempt wins)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    restarts: int = 0
    membership_restarts: int = 0
    agent_rank: int | None = None
    agent_world: int | None = None

    def note(self, part: str, stage: str, fields: dict[str, Any]) -> None:
        with self.lock:
            if part == AGENT:
                if stage == "restart":
                    self.restarts = int(fields.get("restart", self.restarts))
                    self.membership_restarts = int(
                        fields.get("membership_restarts", self.membership_restarts)
                    )
                    self.workers.clear()  # a new attempt: its workers start afresh
                elif stage == "rendezvous_done":
                    self.agent_rank, self.agent_world = fields.get("rank"), fields.get("world_size")
                return
            seen = self.workers.setdefault(part, {})
            if stage == "pg_ready":
                seen.update(rank=fields.get("rank"), world_size=fields.get("world_size"))
                seen["restart"] = fields.get("restart")
            elif stage == "collective_done":
                seen["result"] = fields.get("result")
            elif stage == "worker_failed":
                seen["message"] = fields.get("message")
                seen["error_class"] = fields.get("error_class")


def run_job(spec: JobSpec, sink: StageSink, backend: str, args: HandlerArgs) -> JobResult:
    """Run the node's agent and workers to the end (see the module doc), on ``backend``
    with the node's rendezvous ``args``; never raises."""
    seen = _Seen()

    def tell(part: str, stage: str, t: float, fields: dict[str, Any]) -> None:
        seen.note(part, stage, fields)
        sink(part, stage, t, fields)

    def agent_tells(part: str, stage: str, fields: dict[str, Any]) -> None:
        tell(part, stage, time.monotonic(), fields)

    listener = StageListener(tell)
    failures: dict[int, Any] = {}
    agent: PartResult
    try:
        os.environ.update(spec.env)
        os.environ[REPORT_ENV] = listener.path
        os.environ["HARNESS_JOB_AGENT"] = str(os.getpid())
        os.environ["HARNESS_JOB_PG_TIMEOUT"] = f"{spec.process_group_timeout:g}"
        config = launch_config(spec, backend, args)
        install(reporting_agent(agent_tells, spec.exit_barrier_timeout))
        from torch.distributed.launcher.api import launch_agent

        script = [spec.script, *spec.args] if spec.script else []
        launch_agent(config, sys.executable, ["-u", worker_module.__file__, *script])
        agent = PartResult(AGENT, "ok", exitcode=0)
    except BaseException as exc:  # reported, not raised: the harness judges it
        agent, failures = _agent_failed(exc)
    finally:
        listener.close()
    with seen.lock:
        agent = _with_rendezvous(agent, seen)
        workers = tuple(
            _worker(local, seen.workers.get(worker_part(local), {}), failures, agent.status)
            for local in range(spec.nproc_per_node)
        )
    return JobResult((agent, *workers))


def _qualified(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def _agent_failed(exc: BaseException) -> tuple[PartResult, dict[int, Any]]:
    """The agent's result when ``launch_agent`` raised, and torch's failures by local rank."""
    raw = getattr(exc, "failures", None)
    if type(exc).__name__ == "ChildFailedError" and isinstance(raw, dict):
        by_local = {int(f.local_rank): f for f in raw.values()}
        failed = ", ".join(f"worker {n} exit {by_local[n].exitcode}" for n in sorted(by_local))
        message = f"workers failed: {failed}"
        return PartResult(AGENT, "error", 1, error_class=_qualified(exc), message=message), by_local
    status = classify(exc)
    return PartResult(AGENT, status, 1, error_class=_qualified(exc), message=str(exc)), {}


def _with_rendezvous(agent: PartResult, seen: _Seen) -> PartResult:
    return replace(
        agent,
        rank=seen.agent_rank,
        world_size=seen.agent_world,
        restarts=seen.restarts,
        membership_restarts=seen.membership_restarts,
    )


def _worker(
    local: int, seen: dict[str, Any], failures: dict[int, Any], agent_status: str
) -> PartResult:
    failure = failures.get(local)
    message = seen.get("message")
    signalled = False
    if failure is not None:
        code = int(failure.exitcode)
        exitcode: int | None = code
        signalled = code < 0 and message is None
        if signalled:
            message = f"ended by signal {-code} (its agent stopped the worker group)"
        message = message or f"exited {code} (torch's record)"
    elif agent_status == "ok":
        exitcode = 0
    else:
        exitcode = None
    if exitcode == 0 and message is None:
        status = "ok"
    elif (exitcode is None and message is None) or signalled:
        status = "stopped"
    else:
        status = failure_class(message or "", seen.get("error_class"))
    return PartResult(
        worker_part(local),
        status,
        exitcode,
        rank=seen.get("rank"),
        world_size=seen.get("world_size"),
        result=seen.get("result"),
        restarts=seen.get("restart"),
        error_class=seen.get("error_class"),
        message=message,
    )
