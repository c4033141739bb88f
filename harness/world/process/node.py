"""The node process: run one rendezvous, stream events, report one outcome.

:func:`run_node` is the entry point of every node of the local world (a real OS process
started by :mod:`harness.world.process.cluster`). It builds the handler its backend names
(:mod:`harness.world.process.backends`), calls ``next_rendezvous()`` (a ``returned`` event marks its
return), proves the store is shared (every rank writes a key, every rank reads all of them)
and puts exactly one :class:`~harness.world.messages.Outcome` on the queue, after the
messages that describe what happened on the way (:class:`~harness.world.messages.Ready`,
:class:`~harness.world.messages.Started`, and an :class:`~harness.world.messages.Event` for
each of rdzv's structured log events): the types of :mod:`harness.world.messages`.

A node starts behind the world's start gate (:mod:`harness.world.process.gate`): it says
``ready`` (process up, imports done, channel open), waits until the world releases every
node at once, and says ``started`` with the time it saw the release. How it reports (its
channel, rdzv's log events, its output file, an exception's status) is
:mod:`harness.world.process.reporting`.

A DNS shim (:mod:`harness.world.process.dns`) can be installed first: the endpoint host name then
resolves, inside this process only, to the address the harness chose — or fails with
``EAI_NONAME`` while the harness says DNS is down.

A node is its own process by default; :class:`Hosting` says what changes when several nodes
share one (:mod:`harness.world.process.packed`): how a node launched paused waits, how rdzv's
log events reach the node's queue, the DNS shim, what the world learns of the handler, and
the ``placement`` text the report shows.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from harness.world.base import Launch
from harness.world.messages import Event, Outcome, Ready, Started
from harness.world.process.backends import create_handler
from harness.world.process.dns import DnsShim, install_dns_shim
from harness.world.process.gate import open_gate
from harness.world.process.reporting import Queue, classify, forward_logs
from harness.world.process.shared_store import Seen, prove_shared, quiet_for
from harness.world.process.warm_up import warm_up

__all__ = ["PROCESS", "Hosting", "NodeSpec", "run_node"]


@dataclass(frozen=True)
class NodeSpec:
    """Everything one node process needs (picklable): its launch, and where it is."""

    launch: Launch
    endpoint: str
    listen_fd: int | None = None
    dns: DnsShim | None = None

    @property
    def node(self) -> int:
        return self.launch.node


def _stop_process() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)  # the harness sends SIGCONT


def _ignore(handler: Any) -> None:
    return None


@dataclass(frozen=True)
class Hosting:
    """What hosting a node means for its process (the defaults: the node is the process).

    Attributes:
        freeze: called when the node is launched paused, before it does anything; returns
            when the harness resumes it (default: SIGSTOP itself).
        forward: installs the forwarding of rdzv's log events to the node's queue.
        dns: installs the node's DNS shim.
        adopt: called with the rendezvous handler as soon as it is made.
        placement: how the world runs the node, for the report (in ``started`` and the
            outcome).
        gate: called once the node is ready (its ``ready`` message sent); returns, with the
            monotonic time it saw the release, when the world releases its nodes
            (:func:`process_gate`; default: at once).
    """

    freeze: Callable[[], None] = _stop_process
    forward: Callable[[int, Queue], None] = forward_logs
    dns: Callable[[DnsShim], None] = install_dns_shim
    adopt: Callable[[Any], None] = _ignore
    placement: str = "process"
    gate: Callable[[], float] = open_gate


#: A node that is its own OS process.
PROCESS = Hosting()


def run_node(spec: NodeSpec, queue: Queue, hosting: Hosting = PROCESS) -> None:
    """Entry point of a node: never raises; always reports one outcome.

    Everything a node does before the first step of its rendezvous happens before it says
    ``ready``: its log forwarding and DNS shim are installed and its handler is built
    (:func:`_build`). It then waits at the world's start gate (``hosting.gate``) and, at
    the release, says ``started`` (the time in that event is when this node saw the
    release) and calls ``next_rendezvous()``. After the release, a node's first burst of
    CPU is therefore only the start of its rendezvous: with a thousand node processes on
    two cores, each of them runs before the last one sees the release (docs/reports.md,
    "Start-up and release skew").

    A launch with a ``job`` is a torchrun agent with its workers: the node entry
    (:func:`harness.world.process.forkserver.run_entry`) runs
    :func:`harness.world.process.jobs.node.run_job_node` for it instead.
    """
    placement = hosting.placement
    launch = spec.launch
    hosting.forward(spec.node, queue)
    if spec.dns is not None:
        hosting.dns(spec.dns)
    handler, failure = _build(spec, hosting)
    warm_up(spec.node)
    queue.put(Ready(spec.node, time.monotonic(), os.getpid(), threading.get_native_id()))
    start = hosting.gate()
    queue.put(Started(spec.node, start, os.getpid(), placement))
    if launch.start_paused:  # frozen before its rendezvous begins, until the harness resumes it
        hosting.freeze()
    said = Outcome(spec.node, start, "ok", started=start, pid=os.getpid(), placement=placement)
    seen = Seen()
    try:
        if failure is not None:
            raise failure
        info = handler.next_rendezvous()
        rank, world_size = _rank_and_size(info)
        said = replace(said, rank=rank, world_size=world_size, run_id=launch.run_id)
        queue.put(Event(spec.node, time.monotonic(), "returned", {"rank": rank}))
        quiet = quiet_for(launch.join_timeout)
        shared = prove_shared(_store_of(info), rank, world_size, spec.node, seen, quiet)
        said = replace(said, shared_store_ok=shared)
    except BaseException as exc:  # reported, not raised: the harness judges it
        after = "after the rendezvous returned: " if said.rank is not None else ""
        said = replace(
            said,
            status=classify(exc),
            error_class=f"{type(exc).__module__}.{type(exc).__qualname__}",
            message=f"{after}{exc}",
        )
    finally:
        shutdown_error = _shut_down(handler)
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put(
        replace(
            said,
            t=time.monotonic(),
            seen_ranks=seen.ranks,
            seen_all_but=seen.all_but,
            shutdown_error=shutdown_error,
            maxrss_kib=maxrss,
        )
    )


def _shut_down(handler: Any) -> str | None:
    """Shut ``handler`` down (None: there is none); ``Class: text`` when that raised."""
    if handler is None:
        return None
    try:
        handler.shutdown()
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _build(spec: NodeSpec, hosting: Hosting) -> tuple[Any, BaseException | None]:
    """The node's rendezvous handler, built before the start gate (and adopted), or why it
    could not be built: the failure is reported as the node's outcome after the release,
    as if the node had built its handler then.

    Building a handler does no I/O (rdzv's and torch's static handlers connect, listen and
    start their clocks in ``next_rendezvous()``), but in a process forked from the
    forkserver it is the first touch of the rendezvous code: hundreds of copy-on-write page
    faults, a few milliseconds of CPU that would otherwise be spent after the release.
    """
    launch = spec.launch
    try:
        handler = create_handler(
            launch.backend,
            endpoint=spec.endpoint,
            run_id=launch.run_id,
            rank=launch.rank,
            world_size=launch.world_size,
            timeout=launch.join_timeout,
            config=dict(launch.config),
            listen_fd=spec.listen_fd,
        )
    except BaseException as exc:  # reported after the release, as the node's outcome
        return None, exc
    hosting.adopt(handler)
    return handler, None


def _rank_and_size(info: Any) -> tuple[int, int]:
    if isinstance(info, tuple):  # torch's older (store, rank, world_size)
        return int(info[1]), int(info[2])
    return int(info.rank), int(info.world_size)


def _store_of(info: Any) -> Any:
    return info[0] if isinstance(info, tuple) else info.store
