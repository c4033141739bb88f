"""The parts of job nodes as processes: which PID is each worker, and signals to one part.

A job node's process is its torchrun agent (:mod:`harness.world.process.jobs`); its
workers are the agent's children, started by torch. The agent says which PIDs they have in
its ``workers_started`` stage (``pids``, by local rank; again after each restart): the
cluster hands every message of a node to :meth:`JobParts.note` before passing it on, and a
world signals one part through :meth:`JobParts.signal_worker`. The agent is the node's
process itself (:meth:`~harness.world.process.cluster.LocalCluster.signal`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from harness.world.messages import Event, Message
from harness.world.process.jobs.spec import AGENT, WORKERS_STARTED, worker_local_rank

__all__ = ["JobParts"]


class JobParts:
    """The workers' PIDs of every job node, as their agents last said."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workers: dict[int, list[int]] = {}

    def note(self, message: Message) -> None:
        """Keep the workers' PIDs an agent announces (any other message: nothing)."""
        if isinstance(message, Event) and message.part == AGENT and message.name == WORKERS_STARTED:
            with self._lock:
                self._workers[message.node] = [int(pid) for pid in message.fields["pids"]]

    def forget(self, node: int) -> None:
        """A new incarnation of ``node`` starts: its old workers are not its parts."""
        with self._lock:
            self._workers.pop(node, None)

    def workers(self, node: int) -> list[int]:
        """The PIDs of ``node``'s workers, by local rank (none: not a job, or not started)."""
        with self._lock:
            return list(self._workers.get(node, ()))

    def signal_worker(self, node: int, part: str, sig: signal.Signals) -> bool:
        """Send ``sig`` to ``node``'s worker ``part``; False when it has no such worker
        running (not started yet, or ended)."""
        local = worker_local_rank(part)
        pids = self.workers(node)
        if local is None or local >= len(pids):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pids[local], sig)
            return True
        return False

    def signal_workers(self, node: int, sig: signal.Signals) -> None:
        """Send ``sig`` to every worker of ``node`` that still runs."""
        for pid in self.workers(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
