"""Where nodes run: start, signal, watch and end N node processes.

This is the placement backend the rest of the harness talks to (start / signal / messages /
close); today it is local processes started through ``multiprocess``'s forkserver (warm
imports, so a node starts in a few milliseconds; no fork of a threaded parent). A network
namespace or a cluster engine can implement the same small interface later.

Every process started here is tracked by PID and ended here (SIGKILL, then reaped) — never
anything else on the machine.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue as queue_mod
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import multiprocess
from multiprocess import forkserver, popen_forkserver, reduction, spawn, util
from multiprocess.context import set_spawning_popen

from harness.node import Message, NodeSpec, run_node

__all__ = ["LocalCluster"]

_PRELOAD: Final = ["harness.node", "rdzv.static", "rdzv.client", "rdzv.registry"]
_REAP_TIMEOUT: Final = 10.0


@dataclass
class _Incarnation:
    process: Any
    started: float
    stopped: bool = False
    paused: bool = False


@dataclass
class LocalCluster:
    """Node processes on this machine.

    Messages from nodes (``("event", node, t, name, fields)`` and ``("outcome", node, t,
    fields)``) arrive on a background thread and are handed to ``on_message`` in order;
    the harness also records ``("exit", node, t, {"exitcode": c})`` when a process ends.
    """

    on_message: Callable[[Message], None]
    ctx: Any = None
    _procs: dict[int, list[_Incarnation]] = field(default_factory=dict)
    _queue: Any = None
    _reader: threading.Thread | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _process_class: Any = None

    def __post_init__(self) -> None:
        if self.ctx is None:
            self.ctx = multiprocess.get_context("forkserver")
            self.ctx.set_forkserver_preload(_PRELOAD)
        self._queue = self.ctx.Queue()
        self._process_class = _node_process_class(self.ctx)
        self._reader = threading.Thread(target=self._read, name="harness-inbox", daemon=True)
        self._reader.start()

    # --- the placement interface ----------------------------------------------------

    def start(self, spec: NodeSpec, listen_socket: Any = None) -> int:
        """Start one incarnation of node ``spec.node``; returns its PID.

        ``listen_socket`` (a bound, listening socket) is handed to the process, which
        serves the store on it (its descriptor number reaches the node as ``listen_fd``).
        """
        process = self._process_class(
            target=_entry,
            args=(spec, self._queue, listen_socket),
            name=f"rdzv-node-{spec.node}",
            daemon=True,
        )
        process.start()
        with self._lock:
            self._procs.setdefault(spec.node, []).append(_Incarnation(process, time.monotonic()))
        pid: int = process.pid
        return pid

    def signal(self, node: int, sig: signal.Signals) -> bool:
        """Send ``sig`` to the node's current process; False if it is not running."""
        current = self._current(node)
        if current is None or not current.process.is_alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(current.process.pid, sig)
            if sig == signal.SIGSTOP:
                current.paused = True
            elif sig == signal.SIGCONT:
                current.paused = False
            elif sig == signal.SIGKILL:
                current.stopped = True
            return True
        return False

    def kill(self, node: int) -> bool:
        """SIGKILL the node's current process (resuming it first if paused)."""
        return self.signal(node, signal.SIGKILL)

    def running(self, node: int) -> bool:
        """True while the node's current process is alive."""
        current = self._current(node)
        return current is not None and current.process.is_alive()

    def pids(self) -> list[int]:
        """Every PID this cluster ever started."""
        with self._lock:
            return [i.process.pid for runs in self._procs.values() for i in runs]

    def close(self, grace: float = 5.0) -> list[int]:
        """Give processes ``grace`` seconds to exit, kill the rest, reap all, stop the reader.

        Returns:
            The PIDs that were still running after the grace period and had to be killed.
        """
        killed = []
        with self._lock:
            incarnations = [i for runs in self._procs.values() for i in runs]
        deadline = time.monotonic() + grace
        for inc in incarnations:
            inc.process.join(max(0.0, deadline - time.monotonic()))
        for inc in incarnations:
            if inc.process.is_alive():
                killed.append(inc.process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(inc.process.pid, signal.SIGKILL)
        for inc in incarnations:
            inc.process.join(_REAP_TIMEOUT)
        self._closing.set()
        self._queue.put(("stop",))
        if self._reader is not None:
            self._reader.join(_REAP_TIMEOUT)
        self._queue.close()
        self._queue.join_thread()
        return killed

    # --- internals --------------------------------------------------------------------

    def _current(self, node: int) -> _Incarnation | None:
        with self._lock:
            runs = self._procs.get(node)
            return runs[-1] if runs else None

    def _read(self) -> None:
        while True:
            try:
                message = self._queue.get(timeout=0.1)
            except queue_mod.Empty:
                self._reap_exits()
                continue
            except (EOFError, OSError):
                return
            if message == ("stop",):
                return
            self.on_message(message)

    def _reap_exits(self) -> None:
        with self._lock:
            finished = [
                (node, inc)
                for node, runs in self._procs.items()
                for inc in runs
                if not inc.stopped and not inc.process.is_alive()
            ]
            for _, inc in finished:
                inc.stopped = True
        for node, inc in finished:
            self.on_message(("exit", node, time.monotonic(), {"exitcode": inc.process.exitcode}))


class _NodePopen(popen_forkserver.Popen):  # type: ignore[misc]
    """Forkserver launch without re-importing the parent's ``__main__`` in the child.

    multiprocess makes every forkserver child import the parent's main module (a CLI, or
    pytest) before running its target; that costs ~0.3 s of CPU per node and made 64 nodes
    take 20 s to start. The node entry point lives in this importable module, so children
    need no ``__main__``. Otherwise this is multiprocess's own ``_launch``.
    """

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


def _node_process_class(ctx: Any) -> Any:
    class NodeProcess(ctx.Process):  # type: ignore[misc]
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            return _NodePopen(process_obj)

    return NodeProcess


def _entry(spec: NodeSpec, queue: Any, listen_socket: Any) -> None:
    if listen_socket is not None:
        fd = listen_socket.detach()
        spec = NodeSpec(**{**spec.__dict__, "listen_fd": fd})
    run_node(spec, queue)
