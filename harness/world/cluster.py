"""The local world's node processes: start, signal, watch and end them.

:class:`~harness.world.local.LocalWorld` runs its nodes here: OS processes started through
``multiprocess``'s forkserver (warm imports, so a node starts in a few milliseconds; no
fork of a threaded parent).

Every process started here is tracked by PID and ended here (SIGKILL, then reaped) — never
anything else on the machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import select
import selectors
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import multiprocess
import psutil
from multiprocess import forkserver, popen_forkserver, reduction, spawn, util
from multiprocess.context import set_spawning_popen

from harness.world.backends import preload
from harness.world.node import Message, NodeSpec, run_node

__all__ = ["LocalCluster"]

_REAP_TIMEOUT: Final = 10.0
_OUTPUT_TAIL: Final = 4096
_POLL: Final = 0.1


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
    the harness also records ``("exit", node, t, {"exitcode": c, "message": why})`` when a
    process ends on its own. Each incarnation reports over its own pipe: a process killed in
    the middle of a write can only break its own channel, never block the others (a shared
    queue's write lock would stay held by the dead process).
    """

    on_message: Callable[[Message], None]
    ctx: Any = None
    backends: frozenset[str] = frozenset({"static"})
    _procs: dict[int, list[_Incarnation]] = field(default_factory=dict)
    _channels: dict[Any, tuple[int, _Incarnation]] = field(default_factory=dict)
    #: Channels started but not yet registered with the reader's selector (it owns it).
    _new_channels: list[Any] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _process_class: Any = None

    _wake_r: Any = None
    _wake_w: Any = None
    _output_dir: tempfile.TemporaryDirectory[str] | None = None
    #: The tail of each node's stdout+stderr (all incarnations), filled in by :meth:`close`.
    outputs: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._output_dir = tempfile.TemporaryDirectory(prefix="harness-nodes-")
        self._wake_r, self._wake_w = socket.socketpair()
        if self.ctx is None:
            self.ctx = multiprocess.get_context("forkserver")
            # The forkserver is one per harness process: the first cluster's list counts.
            self.ctx.set_forkserver_preload(
                ["harness.world.cluster", "harness.world.node", *preload(set(self.backends))]
            )
        self._process_class = _node_process_class(self.ctx)
        self._reader = threading.Thread(target=self._read, name="harness-inbox", daemon=True)
        self._reader.start()

    # --- the placement interface ----------------------------------------------------

    def start(self, spec: NodeSpec, listen_socket: Any = None) -> int:
        """Start one incarnation of node ``spec.node``; returns its PID.

        ``listen_socket`` (a bound, listening socket) is handed to the process, which
        serves the store on it (its descriptor number reaches the node as ``listen_fd``).
        """
        reader, writer = self.ctx.Pipe(duplex=False)
        process = self._process_class(
            target=_entry,
            args=(spec, writer, listen_socket, self._output_path(spec.node)),
            name=f"rdzv-node-{spec.node}",
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()  # the child has its own end: EOF here means it is gone
        incarnation = _Incarnation(process, time.monotonic())
        with self._lock:
            self._procs.setdefault(spec.node, []).append(incarnation)
            self._channels[reader] = (spec.node, incarnation)
            self._new_channels.append(reader)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")  # listen to the new channel now, not after a poll
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

    def stopped(self, node: int) -> bool:
        """True while the node's current process is stopped (by SIGSTOP), per the kernel."""
        current = self._current(node)
        if current is None or not current.process.is_alive():
            return False
        try:
            return bool(psutil.Process(current.process.pid).status() == psutil.STATUS_STOPPED)
        except psutil.Error:
            return False

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
        if self._reader is not None:
            self._reader.join(_REAP_TIMEOUT)
        with self._lock:
            leftovers, self._channels, self._new_channels = list(self._channels), {}, []
        for channel in leftovers:
            channel.close()
        self._wake_r.close()
        self._wake_w.close()
        self._collect_outputs()
        return killed

    def _output_path(self, node: int) -> str:
        assert self._output_dir is not None
        return os.path.join(self._output_dir.name, f"node{node}.log")

    def _collect_outputs(self) -> None:
        """Keep the tail of every node's output, then delete the files."""
        if self._output_dir is None:
            return
        for node in self._procs:
            try:
                with open(self._output_path(node), "rb") as handle:
                    handle.seek(0, os.SEEK_END)
                    handle.seek(max(0, handle.tell() - _OUTPUT_TAIL))
                    tail = handle.read().decode("utf-8", "replace")
            except FileNotFoundError:
                continue
            if tail.strip():
                self.outputs[node] = tail
        self._output_dir.cleanup()
        self._output_dir = None

    # --- internals --------------------------------------------------------------------

    def _current(self, node: int) -> _Incarnation | None:
        with self._lock:
            runs = self._procs.get(node)
            return runs[-1] if runs else None

    def _read(self) -> None:
        # One selector for the cluster's life: each channel is registered once, so a message
        # costs the same with 1024 nodes as with 4 (a fresh wait() over every channel per
        # message made a large start-up quadratic).
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                with self._lock:
                    fresh, self._new_channels = self._new_channels, []
                    idle = not self._channels
                for new in fresh:
                    selector.register(new, selectors.EVENT_READ)
                if idle and self._closing.is_set():
                    return
                for key, _ in selector.select(timeout=_POLL):
                    channel: Any = key.fileobj
                    if channel is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                        continue
                    try:
                        message = channel.recv()
                    except (EOFError, OSError):
                        selector.unregister(channel)
                        self._ended(channel)
                    else:
                        self.on_message(message)

    def _ended(self, channel: Any) -> None:
        with self._lock:
            node, inc = self._channels.pop(channel)
        channel.close()
        inc.process.join(_REAP_TIMEOUT)
        if not inc.stopped:  # a process the harness killed has its outcome already
            inc.stopped = True
            code = inc.process.exitcode
            why = f"the node process exited with code {code} without reporting an outcome"
            self.on_message(("exit", node, time.monotonic(), {"exitcode": code, "message": why}))


class _PipeReporter:
    """The node's side of its channel: ``put`` sends one message, whole, from any thread."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    def put(self, item: Message) -> None:
        with self._lock:
            self._connection.send(item)


class _NodePopen(popen_forkserver.Popen):  # type: ignore[misc]
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


def _node_process_class(ctx: Any) -> Any:
    class NodeProcess(ctx.Process):  # type: ignore[misc]
        @staticmethod
        def _Popen(process_obj: Any) -> Any:
            return _NodePopen(process_obj)

    return NodeProcess


def _entry(spec: NodeSpec, channel: Any, listen_socket: Any, output_path: str) -> None:
    # Ctrl-C at a terminal reaches the whole process group: the harness, not the node,
    # decides what it means (it stops the run and kills its nodes by PID).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The node's stdout and stderr (torch's C++ logs included) go to its own file, shown
    # in the report, instead of interleaving on the harness's terminal.
    out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    if listen_socket is not None:
        fd = listen_socket.detach()
        spec = dataclasses.replace(spec, listen_fd=fd)
    try:
        run_node(spec, _PipeReporter(channel))
    finally:
        channel.close()
