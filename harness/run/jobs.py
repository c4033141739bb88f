"""A scenario's ``[job]`` for the world: the :class:`~harness.world.specs.JobSpec` each node
launches with. Whether the scenario's world and backend can run jobs is the registry's
question (:func:`harness.run.worlds.admit`), asked before the run.
"""

from __future__ import annotations

from pathlib import Path

from harness.scenario.model import Scenario
from harness.world.specs import JobSpec

__all__ = ["job_spec"]


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
        endpoint=job.endpoint,
        local_addr=job.local_addr,
    )
