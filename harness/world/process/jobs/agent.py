"""torch's agent for a job node: its launch configuration, and the stages it reports.

:func:`launch_config` is what ``torchrun`` would build from a node's flags, for the node's
backend (the harness's names):

=================== ================ ==========================================================
harness backend      torchrun's       node rank, store host, the harness's socket
=================== ================ ==========================================================
``static`` (rdzv)   ``rdzv``          ``rdzv_configs`` rank; node 0's ``listen_fd``
``torch-static``    ``static``        ``rdzv_configs`` rank (what ``--node-rank`` becomes);
                                      node 0's TCPStore serves on the socket (``serve_on``)
``torch-c10d``      ``c10d``          torch ranks the agents; ``is_host`` on rank 0 only,
                                      whose TCPStore serves on the socket
=================== ================ ==========================================================

:func:`reporting_agent` is torch's ``LocalElasticAgent`` telling its stages as it reaches
them (``rendezvous_done``, ``workers_started``, ``restart``) and waiting ``exit_barrier``
seconds (not torch's 300) for the other agents once its workers are done. ``launch_agent``
builds its agent by the name ``LocalElasticAgent`` in ``torch.distributed.launcher.api``;
:func:`install` puts the reporting one there, in this process only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from harness.world.process.jobs.spec import AGENT, WORKERS_STARTED
from harness.world.process.torch_backends import (
    C10D_MODULE,
    STATIC_MODULE,
    TORCH_C10D,
    TORCH_STATIC,
    HandlerArgs,
    serve_on,
    whole_seconds,
)
from harness.world.specs import JobSpec

__all__ = ["TORCHRUN_BACKENDS", "install", "launch_config", "reporting_agent"]

#: The harness's backend name -> torchrun's ``--rdzv-backend``.
TORCHRUN_BACKENDS = {"static": "rdzv", TORCH_STATIC: "static", TORCH_C10D: "c10d"}
#: c10d's wait for more nodes once every node joined (min = max: bounds a round that
#: cannot complete).
_LAST_CALL_SECONDS = 1

#: Where an agent's stage goes: part, stage, fields (the time is taken when it is told).
AgentSink = Callable[[str, str, dict[str, Any]], None]


def launch_config(spec: JobSpec, backend: str, args: HandlerArgs) -> Any:
    """torch's ``LaunchConfig`` for one job node (see the module doc for each backend):
    ``args`` are what the node's rendezvous handler would be built from (its ``config`` is
    not used: a job's rendezvous is configured by its backend, as torchrun's is).

    Raises:
        ValueError: ``backend`` is not one a job can run on (a ``module:factory`` handler
            is not a torchrun backend).
    """
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig

    try:
        torchrun_backend = TORCHRUN_BACKENDS[backend]
    except KeyError:
        allowed = ", ".join(repr(name) for name in TORCHRUN_BACKENDS)
        raise ValueError(
            f"a job runs on a torchrun rendezvous backend: {allowed}; got {backend!r} "
            "(run the scenario with --backend one of these)"
        ) from None
    if not spec.endpoint:
        args = _without_endpoint(torchrun_backend, args)
    rank, listen_fd, join_timeout = args.rank, args.listen_fd, args.timeout
    join = whole_seconds(join_timeout)
    configs: dict[str, Any]
    if torchrun_backend == "rdzv":
        configs = {"rank": rank, "timeout": join_timeout, "read_timeout": join_timeout}
        if listen_fd is not None and rank == 0:
            configs["listen_fd"] = listen_fd
    elif torchrun_backend == "static":
        configs = {"rank": rank, "timeout": join}
        if listen_fd is not None and rank == 0:
            serve_on(STATIC_MODULE, listen_fd)
    else:
        configs = {
            "is_host": rank == 0 or not spec.endpoint,  # torch: a local endpoint is hosted
            "join_timeout": join,
            "read_timeout": join,
            "last_call_timeout": _LAST_CALL_SECONDS,
        }
        if listen_fd is not None and configs["is_host"]:
            serve_on(C10D_MODULE, listen_fd)
    return LaunchConfig(
        min_nodes=args.world_size,
        max_nodes=args.world_size,
        nproc_per_node=spec.nproc_per_node,
        run_id=args.run_id,
        rdzv_endpoint=args.endpoint,
        rdzv_backend=torchrun_backend,
        rdzv_configs=configs,
        max_restarts=spec.max_restarts,
        monitor_interval=spec.monitor_interval,
        start_method="spawn",
        logs_specs=DefaultLogsSpecs(log_dir=os.devnull),
        local_addr=spec.local_addr,
    )


def _without_endpoint(torchrun_backend: str, args: HandlerArgs) -> HandlerArgs:
    """What a node's rendezvous is handed when torchrun runs without ``--rdzv-endpoint``.

    rdzv gets no endpoint (torchrun passes ``""``). torch's ``static`` falls back to
    ``--master-addr``:``--master-port`` (127.0.0.1:29500) and ``c10d`` to ``localhost:29400``,
    which it hosts itself (the host is this machine's): on separate machines each node dials
    its own host. The nodes here share one loopback, so each gets a port of its own (bound
    to port 0 here, never 29400): node 0's socket from the harness; another node's, bound
    now and hosted by ``c10d`` (``is_host``), left unlistened by ``static`` (only rank 0
    hosts; the others' connects are refused).
    """
    if torchrun_backend == "rdzv":
        return replace(args, endpoint="")
    fd = args.listen_fd
    if fd is None:
        own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        own.bind(("127.0.0.1", 0))
        if torchrun_backend == "c10d":
            own.listen(128)
        fd = own.detach()
    probe = socket.socket(fileno=os.dup(fd))
    port = probe.getsockname()[1]
    probe.close()
    return replace(args, endpoint=f"127.0.0.1:{port}", listen_fd=fd)


def reporting_agent(sink: AgentSink, exit_barrier: float) -> type:
    """A ``LocalElasticAgent`` subclass that tells ``sink`` its stages."""
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    class ReportingAgent(LocalElasticAgent):  # type: ignore[misc, unused-ignore]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("exit_barrier_timeout", exit_barrier)
            super().__init__(*args, **kwargs)
            self.harness_restarts = 0  # every restart of the worker group
            self.harness_membership_restarts = 0  # those for a membership change

        def _rendezvous(self, worker_group: Any) -> None:
            super()._rendezvous(worker_group)
            sink(
                AGENT,
                "rendezvous_done",
                {
                    "rank": worker_group.group_rank,
                    "world_size": worker_group.group_world_size,
                    "master": f"{worker_group.master_addr}:{worker_group.master_port}",
                    "restart": self.harness_restarts,
                },
            )

        def _start_workers(self, worker_group: Any) -> dict[int, Any]:
            started: dict[int, Any] = super()._start_workers(worker_group)
            pids = [started[local] for local in sorted(started)]  # by local rank
            sink(AGENT, WORKERS_STARTED, {"pids": pids})
            return started

        def _restart_workers(self, worker_group: Any) -> None:
            # torch restarts a FAILED/UNHEALTHY group (counted against --max-restarts) and
            # a HEALTHY one when other agents wait to rendezvous (a membership change,
            # not counted): the group's state tells them apart.
            self.harness_restarts += 1
            cause = "failure"
            if getattr(worker_group.state, "name", None) == "HEALTHY":
                self.harness_membership_restarts += 1
                cause = "membership"
            sink(
                AGENT,
                "restart",
                {
                    "restart": self.harness_restarts,
                    "membership_restarts": self.harness_membership_restarts,
                    "cause": cause,
                },
            )
            super()._restart_workers(worker_group)

    return ReportingAgent


def install(agent_class: type) -> None:
    """Make ``launch_agent`` build ``agent_class`` (in this process)."""
    import torch.distributed.launcher.api as launcher

    launcher.LocalElasticAgent = agent_class  # type: ignore[assignment, attr-defined, unused-ignore]
