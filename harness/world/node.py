"""The node process: run one rendezvous, stream events, report one outcome.

:func:`run_node` is the entry point of every node of the local world (a real OS process
started by :mod:`harness.world.cluster`). It builds the handler its backend names
(:mod:`harness.world.backends`), calls ``next_rendezvous()`` (a ``returned`` event marks its
return), proves the store is shared (every rank writes a key, every rank reads all of them)
and puts exactly one :class:`~harness.world.messages.Outcome` on the queue, after the
messages that describe what happened on the way (:class:`~harness.world.messages.Ready`,
:class:`~harness.world.messages.Started`, and an :class:`~harness.world.messages.Event` for
each of rdzv's structured log events): the types of :mod:`harness.world.messages`.

A node starts behind the world's start gate: it says ``ready`` (process up, imports done,
channel open), waits until the world releases every node at once (:func:`wait_gate`: the
world closes the one write end of a pipe all nodes wait on), and says ``started`` with the
time it saw the release.

A DNS shim (:mod:`harness.world.dns`) can be installed first: the endpoint host name then
resolves, inside this process only, to the address the harness chose — or fails with
``EAI_NONAME`` while the harness says DNS is down.

A node is its own process by default; :class:`Hosting` says what changes when several nodes
share one (:mod:`harness.world.packed.node`): how a node launched paused waits, how rdzv's
log events reach the node's queue, the DNS shim, what the world learns of the handler, and
the ``placement`` text the report shows.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import resource
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from harness.world.backends import create_handler
from harness.world.base import Launch
from harness.world.dns import DnsShim, install_dns_shim
from harness.world.messages import Event, Message, Outcome, Ready, Started
from harness.world.shared_store import Seen, prove_shared, quiet_for
from harness.world.warm_up import warm_up
from rdzv.events import EVENT_ATTR

__all__ = [
    "PROCESS",
    "Hosting",
    "NodeSpec",
    "PipeReporter",
    "classify",
    "forward_logs",
    "process_gate",
    "redirect_output",
    "run_node",
    "wait_gate",
]


class _Queue(Protocol):
    def put(self, item: Message) -> None: ...


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


def classify(exc: BaseException) -> str:
    """Map an exception to an outcome name (rdzv's classes, torch's, or the builtins)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "RendezvousClosedError" in names:
        return "closed"
    if "RendezvousStateError" in names:
        return "state_error"
    if isinstance(exc, TimeoutError) or "RendezvousTimeoutError" in names:
        return "timeout"
    if "DistStoreError" in names and re.search(r"timed out|timeout", str(exc), re.IGNORECASE):
        return "timeout"
    if isinstance(exc, ConnectionError) or names & {
        "RendezvousConnectionError",
        "DistNetworkError",
    }:
        return "connection_error"
    return "error"


class _Forward(logging.Handler):
    """Forward rdzv's structured events to the harness as they happen."""

    def __init__(self, node: int, queue: _Queue) -> None:
        super().__init__(logging.DEBUG)
        self.node = node
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, EVENT_ATTR, None)
        if isinstance(payload, dict):
            fields = {k: v for k, v in payload.items() if k != "event"}
            self.queue.put(Event(self.node, time.monotonic(), payload["event"], fields))


def _stop_process() -> None:
    os.kill(os.getpid(), signal.SIGSTOP)  # the harness sends SIGCONT


def forward_logs(node: int, queue: _Queue) -> None:
    """Send rdzv's (and torch's) structured log events of this process to ``queue``."""
    for name in ("rdzv", "torch.distributed"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_Forward(node, queue))
        logger.propagate = False


def _ignore(handler: Any) -> None:
    return None


def _open() -> float:
    return time.monotonic()


def wait_gate(gate: Any) -> float:
    """Block until the start gate opens; returns when this node saw it open (monotonic).

    The world closes the gate pipe's write end, and every node waiting on its read end
    ``gate`` (a connection or a descriptor) wakes on that one close. A gate already open
    does not block.
    """
    fd = gate if isinstance(gate, int) else gate.fileno()
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while not poller.poll():  # pragma: no cover - woken without an event
        pass
    return time.monotonic()


def process_gate(gate: Any) -> float:
    """The start gate of a node that is its own process: :func:`wait_gate`, then straight
    on into its rendezvous (giving way there, with ``sched_yield``, made the noted times
    close and the rendezvous starts late: docs/reports.md, "Start-up and release skew")."""
    return wait_gate(gate)


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
    forward: Callable[[int, _Queue], None] = forward_logs
    dns: Callable[[DnsShim], None] = install_dns_shim
    adopt: Callable[[Any], None] = _ignore
    placement: str = "process"
    gate: Callable[[], float] = _open


#: A node that is its own OS process.
PROCESS = Hosting()


class PipeReporter:
    """A node's side of its channel: ``put`` sends one message, whole, from any thread.

    Pickled with the standard pickle (about 2 µs for a typed message, most of it naming its
    class; as much again to read it) and sent as bytes when the channel takes bytes (a
    ``multiprocess`` connection reads any pickle); its own ``send`` uses dill (about 45 µs).
    What the standard pickle cannot take goes through ``send``.
    """

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._send_bytes: Callable[[bytes], None] | None = getattr(connection, "send_bytes", None)
        self._lock = threading.Lock()

    def put(self, item: object) -> None:
        data = None
        if self._send_bytes is not None:
            try:
                data = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):
                data = None  # not plain data: dill, below
        with self._lock:
            if data is not None and self._send_bytes is not None:
                self._send_bytes(data)
            else:
                self._connection.send(item)


def redirect_output(output_path: str) -> None:
    """Set up a node process: Ctrl-C ignored, stdout and stderr to ``output_path``."""
    # Ctrl-C at a terminal reaches the whole process group: the harness, not the node,
    # decides what it means (it stops the run and kills its nodes by PID).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The node's stdout and stderr (torch's C++ logs included) go to its own file, shown
    # in the report, instead of interleaving on the harness's terminal.
    out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)


def run_node(spec: NodeSpec, queue: _Queue, hosting: Hosting = PROCESS) -> None:
    """Entry point of a node: never raises; always reports one outcome.

    Everything a node does before the first step of its rendezvous happens before it says
    ``ready``: its log forwarding and DNS shim are installed and its handler is built
    (:func:`_build`). It then waits at the world's start gate (``hosting.gate``) and, at
    the release, says ``started`` (the time in that event is when this node saw the
    release) and calls ``next_rendezvous()``. After the release, a node's first burst of
    CPU is therefore only the start of its rendezvous: with a thousand node processes on
    two cores, each of them runs before the last one sees the release (docs/reports.md,
    "Start-up and release skew").

    A launch with a ``job`` is a torchrun agent with its workers: the cluster's entry runs
    :func:`harness.world.jobs.node.run_job_node` for it instead.
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
