"""The node process of a job node: torch imported before the gate, the agent after it.

:func:`run_job_node` is :func:`harness.world.process.node.run_node` for a launch with a ``job``: it
forwards rdzv's events and installs the DNS shim like any node, imports torch (start-up:
before it says ``ready``; how long it took is the ``torch_imported`` event after
``started``), waits at the gate, then runs :func:`~harness.world.process.jobs.run.run_job`. Every
stage of its parts goes to the harness as an :class:`~harness.world.messages.Event` of that
part; at the end, one :class:`~harness.world.messages.Outcome` per part, then the node's own
(its agent's status, group rank and world size), which ends the incarnation.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import replace
from typing import Any, Protocol

from harness.world.messages import Event, Message, Outcome, Ready, Started
from harness.world.process.jobs.run import import_torch, run_job
from harness.world.process.jobs.spec import PartResult
from harness.world.process.node import PROCESS, Hosting, NodeSpec
from harness.world.process.torch_backends import HandlerArgs

__all__ = ["run_job_node"]


class _Queue(Protocol):
    def put(self, item: Message) -> None: ...


def run_job_node(spec: NodeSpec, queue: _Queue, hosting: Hosting = PROCESS) -> None:
    """Entry point of a job node (see the module doc); never raises."""
    launch, node = spec.launch, spec.node
    job = launch.job
    assert job is not None, "run_job_node runs a launch with a job"
    hosting.forward(node, queue)
    if spec.dns is not None:
        hosting.dns(spec.dns)
    imported = import_torch()
    queue.put(Ready(node, time.monotonic(), os.getpid(), threading.get_native_id()))
    start = hosting.gate()
    queue.put(Started(node, start, os.getpid(), hosting.placement))
    queue.put(Event(node, start, "torch_imported", {"seconds": round(imported, 3)}))
    if launch.start_paused:
        hosting.freeze()

    def sink(part: str, stage: str, t: float, fields: dict[str, Any]) -> None:
        queue.put(Event(node, t, stage, fields, part=part))

    args = HandlerArgs(
        spec.endpoint,
        launch.run_id,
        launch.rank,
        launch.world_size,
        launch.join_timeout,
        dict(launch.config),
        spec.listen_fd,
    )
    result = run_job(job, sink, launch.backend, args)
    for each in result.parts:
        queue.put(_said(node, start, each, part=each.part))
    queue.put(  # the node's own outcome: its agent's, which ends the incarnation
        _said(
            node,
            start,
            result.agent,
            placement=hosting.placement,
            run_id=launch.run_id,
            maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        )
    )


def _said(node: int, start: float, result: PartResult, **extra: Any) -> Outcome:
    """An Outcome of a part's ``result`` (``extra``: its part's name, or the fields only
    the node's own outcome has)."""
    return replace(
        Outcome(node, time.monotonic(), result.status, started=start, pid=os.getpid()),
        rank=result.rank,
        world_size=result.world_size,
        error_class=result.error_class,
        message=result.message,
        exitcode=result.exitcode,
        result=result.result,
        restarts=result.restarts,
        membership_restarts=result.membership_restarts,
        **extra,
    )
