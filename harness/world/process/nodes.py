"""The node verbs every world whose nodes are processes of a local cluster shares."""

from __future__ import annotations

import signal

from harness.world.process.cluster import LocalCluster
from harness.world.process.jobs.spec import AGENT

__all__ = ["ProcessNodes"]


class ProcessNodes:
    """The node verbs of a world whose nodes are processes of its :class:`LocalCluster`
    (``self.cluster``): release at the start gate, SIGKILL, SIGSTOP/SIGCONT, output.

    A job node is its agent (the node's process) and its workers (the agent's children):
    the node's verbs act on all of them (the agent first: it sees no worker end before it
    stops itself), the part verbs on one (the agent alone: its workers end by their death
    signal, as torch's do).
    """

    cluster: LocalCluster

    def release(self) -> None:
        self.cluster.release()

    def kill(self, node: int) -> bool:
        killed = self.cluster.kill(node)
        self.cluster.parts.signal_workers(node, signal.SIGKILL)
        return killed

    def pause(self, node: int) -> bool:
        paused = self.cluster.signal(node, signal.SIGSTOP)
        self.cluster.parts.signal_workers(node, signal.SIGSTOP)
        return paused

    def resume(self, node: int) -> bool:
        self.cluster.parts.signal_workers(node, signal.SIGCONT)
        return self.cluster.signal(node, signal.SIGCONT)

    def paused(self, node: int) -> bool:
        return self.cluster.stopped(node)

    def kill_part(self, node: int, part: str) -> bool:
        return self._signal_part(node, part, signal.SIGKILL)

    def pause_part(self, node: int, part: str) -> bool:
        return self._signal_part(node, part, signal.SIGSTOP)

    def resume_part(self, node: int, part: str) -> bool:
        return self._signal_part(node, part, signal.SIGCONT)

    def _signal_part(self, node: int, part: str, sig: signal.Signals) -> bool:
        if part == AGENT:
            return self.cluster.signal(node, sig)
        return self.cluster.parts.signal_worker(node, part, sig)

    def live(self, node: int) -> int:
        return self.cluster.live(node)

    def output(self, node: int) -> str | None:
        return self.cluster.outputs.get(node)
