"""The node verbs every world whose nodes are processes of a local cluster shares."""

from __future__ import annotations

import signal

from harness.world.process.cluster import LocalCluster

__all__ = ["ProcessNodes"]


class ProcessNodes:
    """The node verbs of a world whose nodes are processes of its :class:`LocalCluster`
    (``self.cluster``): release at the start gate, SIGKILL, SIGSTOP/SIGCONT, output."""

    cluster: LocalCluster

    def release(self) -> None:
        self.cluster.release()

    def kill(self, node: int) -> bool:
        return self.cluster.kill(node)

    def pause(self, node: int) -> bool:
        return self.cluster.signal(node, signal.SIGSTOP)

    def resume(self, node: int) -> bool:
        return self.cluster.signal(node, signal.SIGCONT)

    def paused(self, node: int) -> bool:
        return self.cluster.stopped(node)

    def live(self, node: int) -> int:
        return self.cluster.live(node)

    def output(self, node: int) -> str | None:
        return self.cluster.outputs.get(node)
