"""A node process through the forkserver: how it is launched, and what it runs first.

:func:`node_process_class` is the process class the cluster starts (launched by
:class:`NodePopen`: no re-import of the parent's ``__main__`` in the child); :func:`entry`
is what a node process runs (its output to a file, its listening socket handed over, its
start gate the pipe every node shares, its messages on its own pipe), then
:func:`~harness.world.process.node.run_node` (a job node's:
:func:`~harness.world.process.jobs.node.run_job_node`).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import select
from collections.abc import Callable
from typing import Any

from multiprocess import forkserver, popen_forkserver, reduction, spawn, util
from multiprocess.context import set_spawning_popen

from harness.world.process.gate import process_gate
from harness.world.process.jobs.node import run_job_node
from harness.world.process.node import PROCESS, NodeSpec, run_node
from harness.world.process.reporting import PipeReporter, redirect_output

__all__ = ["NodePopen", "entry", "node_process_class", "run_entry"]


class NodePopen(popen_forkserver.Popen):  # type: ignore[misc]
    """Forkserver launch without re-importing the parent's ``__main__`` in the child.

    multiprocess makes every forkserver child import the parent's main module (a CLI, or
    pytest) before running its target; that costs ~0.3 s of CPU per node and made 64 nodes
    take 20 s to start. The node entry point lives in this importable module, so children
    need no ``__main__``. Otherwise this is multiprocess's own ``_launch``.
    """

    def poll(self, flag: int = os.WNOHANG) -> int | None:
        # multiprocess polls every live child at each start (``_cleanup``), through a fresh
        # selector per child: quadratic in the number of nodes. A non-blocking check of the
        # sentinel alone is enough to know the process has not ended.
        if self.returncode is None and flag == os.WNOHANG:
            check = select.poll()
            check.register(self.sentinel, select.POLLIN)
            if not check.poll(0):
                return None
        result: int | None = super().poll(flag)
        return result

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)
        parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds, (parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


def node_process_class(ctx: Any) -> Any:
    class NodeProcess(ctx.Process):  # type: ignore[misc]
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            return NodePopen(process_obj)

    return NodeProcess


def entry(channel: Any, output_path: str, spec: NodeSpec, listen_socket: Any, gate: Any) -> None:
    """A node process of the local world: node 0 gets the listening socket the harness
    bound for it (``listen_socket``), then :func:`run_entry`."""
    if listen_socket is not None:
        spec = dataclasses.replace(spec, listen_fd=listen_socket.detach())
    run_entry(channel, output_path, spec, gate)


def run_entry(
    channel: Any,
    output_path: str,
    spec: NodeSpec,
    gate: Any,
    placement: str = PROCESS.placement,
    setup: Callable[[], None] | None = None,
) -> None:
    """What every node process runs: its output to ``output_path``, ``setup`` (the netns
    world: enter the node's namespace), then the node, ready and waiting at the world's
    start ``gate`` until the release, reporting on ``channel`` (closed at the end). A
    launch with a ``job`` is a torchrun agent with its workers
    (:func:`~harness.world.process.jobs.node.run_job_node`)."""
    redirect_output(output_path)
    gated = functools.partial(process_gate, gate)
    hosting = dataclasses.replace(PROCESS, gate=gated, placement=placement)
    try:
        if setup is not None:
            setup()
        run = run_job_node if spec.launch.job is not None else run_node
        run(spec, PipeReporter(channel), hosting)
    finally:
        channel.close()
