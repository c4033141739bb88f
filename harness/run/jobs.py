"""A scenario's ``[job]`` for the world: the :class:`~harness.world.jobs.spec.JobSpec` each
node launches with, and whether the scenario's world and backend can run jobs.

A job runs where its nodes are processes on this machine (the local world; not packed,
not Ray) and on a torchrun rendezvous backend (rdzv's ``static``, ``torch-static``,
``torch-c10d``), with torch installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from harness.errors import UnsupportedError
from harness.scenario.model import Scenario
from harness.world.jobs.agent import TORCHRUN_BACKENDS
from harness.world.jobs.spec import JobSpec

__all__ = ["check_job_supported", "job_spec"]


def job_spec(sc: Scenario) -> JobSpec | None:
    """What every node of ``sc`` runs as a job (None: ``sc`` has no ``[job]``): the script
    resolved next to the scenario file, the timeouts left out defaulting to the join
    timeout."""
    job = sc.job
    if job is None:
        return None
    script = None
    if job.script is not None:
        path = Path(job.script)
        if not path.is_absolute() and sc.path is not None:
            path = Path(sc.path).parent / path
        script = str(path.resolve())
    join = sc.timeouts.join
    return JobSpec(
        nproc_per_node=job.nproc_per_node,
        script=script,
        args=tuple(job.args),
        max_restarts=job.max_restarts,
        monitor_interval=job.monitor_interval,
        exit_barrier_timeout=job.exit_barrier_timeout or join,
        env=dict(job.env),
        process_group_timeout=job.process_group_timeout or join,
    )


def check_job_supported(sc: Scenario) -> None:
    """Check that a job scenario can run as given (nothing to check without ``[job]``).

    Raises:
        UnsupportedError: its world or backend cannot run torchrun jobs, or torch is not
            installed; the message says what can.
    """
    if sc.job is None:
        return
    if sc.backend not in TORCHRUN_BACKENDS:
        allowed = ", ".join(repr(name) for name in TORCHRUN_BACKENDS)
        raise UnsupportedError(
            f"a job runs on a torchrun rendezvous backend ({allowed}), not {sc.backend!r}: "
            "run it with --backend one of these",
            world=sc.world,
            capability="jobs",
        )
    if sc.world != "local" or sc.pack is not None:
        where = f"packed {sc.pack} per process" if sc.pack is not None else f"the {sc.world} world"
        raise UnsupportedError(
            f"job nodes run as processes of the local world, not {where}: drop 'world' and "
            "'pack' (or --world, --pack)",
            world=sc.world,
            capability="jobs",
        )
    if importlib.util.find_spec("torch") is None:
        raise UnsupportedError(
            "a job runs torch's agent and workers: install the torch extra (torch==2.13.0)",
            world=sc.world,
            capability="jobs",
        )
