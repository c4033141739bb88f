"""The local world's node processes: start, signal, watch and end them.

:class:`~harness.world.local.LocalWorld` runs its nodes here: OS processes started through
``multiprocess``'s forkserver (warm imports, so a node starts in a few milliseconds; no
fork of a threaded parent). :meth:`LocalCluster.spawn` starts any other entry point the
same way, with its own message and exit handling (the packed world's processes, each
running several nodes as threads: :mod:`harness.world.process.packed`); the forkserver
preloads every entry module, so no child imports one at start.

Nodes start behind a gate: each node process, once up (imports done, its channel open),
says ``ready`` and waits on the read end of one pipe every node shares;
:meth:`LocalCluster.release` closes the write end, the only one, and every waiting node
wakes on that one operation (instead of starting one after another as they are spawned).
Nodes started after the release find the gate open.

Every process started here is tracked by PID and ended here (SIGKILL, then reaped) — never
anything else on the machine.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import multiprocess
import psutil
from multiprocess.connection import wait as wait_any

from harness.world.messages import Exit, Message
from harness.world.process.backends import preload
from harness.world.process.forkserver import entry, node_process_class
from harness.world.process.node import NodeSpec
from harness.world.process.parts import JobParts

__all__ = ["ENTRY_MODULES", "Key", "LocalCluster"]

#: The modules whose functions run in forkserver children; preloaded by the forkserver.
ENTRY_MODULES: Final = (
    "harness.world.process.forkserver",
    "harness.world.process.node",
    "harness.world.process.jobs.node",
    "harness.world.process.packed",
    "harness.world.netns.enter",
)
#: What a process is known by: a node id, or a name (``"pack3"``) for other processes.
Key: TypeAlias = int | str

_REAP_TIMEOUT: Final = 10.0
_OUTPUT_TAIL: Final = 4096
_POLL: Final = 0.1


@dataclass
class _Incarnation:
    process: Any
    started: float
    stopped: bool = False
    paused: bool = False
    #: Called (on the reader thread) with its exit code when the process ended on its own,
    #: instead of the node's ``exit`` message.
    on_exit: Callable[[int | None], None] | None = None


@dataclass
class LocalCluster:
    """Node processes on this machine.

    Messages from nodes (:mod:`harness.world.messages`) arrive on a background thread and
    are handed to ``on_message`` in order; the harness also sends an
    :class:`~harness.world.messages.Exit` when a process ends on its own. Each incarnation
    reports over its own pipe: a process killed in the middle of a write can only break its
    own channel, never block the others (a shared queue's write lock would stay held by the
    dead process).
    """

    on_message: Callable[[Message], None]
    ctx: Any = None
    backends: frozenset[str] = frozenset({"static"})
    _procs: dict[Key, list[_Incarnation]] = field(default_factory=dict)
    _channels: dict[Any, tuple[Key, _Incarnation]] = field(default_factory=dict)
    #: Channels started but not yet registered with the reader's selector (it owns it),
    #: with the function their messages go to.
    _new_channels: list[tuple[Any, Callable[[Any], None]]] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _closing: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _process_class: Any = None

    _wake_r: Any = None
    _wake_w: Any = None
    #: The start gate: every node waits on ``gate`` (the read end) until :meth:`release`
    #: closes ``_gate_w`` (the write end, which never leaves this process).
    gate: Any = None
    _gate_w: Any = None
    _output_dir: tempfile.TemporaryDirectory[str] | None = None
    #: The tail of each process's stdout+stderr (all incarnations), by key, filled in by
    #: :meth:`close`.
    outputs: dict[Key, str] = field(default_factory=dict)
    #: The workers of job nodes, by the PIDs their agents announce.
    parts: JobParts = field(default_factory=JobParts)

    def __post_init__(self) -> None:
        self._output_dir = tempfile.TemporaryDirectory(prefix="harness-nodes-")
        self._wake_r, self._wake_w = socket.socketpair()
        if self.ctx is None:
            self.ctx = multiprocess.get_context("forkserver")
            # The forkserver is one per harness process: the first cluster's list counts.
            self.ctx.set_forkserver_preload([*ENTRY_MODULES, *preload(set(self.backends))])
        self._process_class = node_process_class(self.ctx)
        self.gate, self._gate_w = self.ctx.Pipe(duplex=False)
        self._reader = threading.Thread(target=self._read, name="harness-inbox", daemon=True)
        self._reader.start()

    # --- the placement interface ----------------------------------------------------

    def start(self, spec: NodeSpec, listen_socket: Any = None) -> int:
        """Start one incarnation of node ``spec.node``; returns its PID.

        ``listen_socket`` (a bound, listening socket) is handed to the process, which
        serves the store on it (its descriptor number reaches the node as ``listen_fd``).
        """
        process = self.spawn(
            spec.node, f"rdzv-node-{spec.node}", entry, (spec, listen_socket, self.gate)
        )
        pid: int = process.pid
        return pid

    def release(self) -> None:
        """Open the start gate: every node waiting at it goes on now (idempotent)."""
        with self._lock:
            writer, self._gate_w = self._gate_w, None
        if writer is not None:
            writer.close()

    @property
    def released(self) -> bool:
        """Whether the start gate is open."""
        return self._gate_w is None

    def spawn(
        self,
        key: Key,
        name: str,
        target: Callable[..., None],
        args: tuple[Any, ...],
        deliver: Callable[[Any], None] | None = None,
        on_exit: Callable[[int | None], None] | None = None,
    ) -> Any:
        """Start ``target(channel, output_path, *args)`` in a forkserver child; returns it.

        ``target`` must live in a module of :data:`ENTRY_MODULES`. What the child sends on
        ``channel`` goes to ``deliver`` (default: ``on_message``), on the reader thread; its
        stdout and stderr belong in ``output_path`` (:attr:`outputs` keeps the tail under
        ``key``). When it ends without having been killed here, ``on_exit(exitcode)`` is
        called (default: the ``exit`` message of node ``key``). Tracked by PID, ended by
        :meth:`close` like every node process. A node (an int ``key``) is one process at a
        time: its process still running is killed first.
        """
        if isinstance(key, int):
            self.kill(key)
            self.parts.forget(key)
        reader, writer = self.ctx.Pipe(duplex=False)
        process = self._process_class(
            target=target,
            args=(writer, self._output_path(key), *args),
            name=name,
            daemon=True,
        )
        try:
            process.start()
        except BaseException:
            reader.close()
            raise
        finally:
            writer.close()  # the child has its own end: EOF here means it is gone
        incarnation = _Incarnation(process, time.monotonic(), on_exit=on_exit)
        with self._lock:
            self._procs.setdefault(key, []).append(incarnation)
            self._channels[reader] = (key, incarnation)
            self._new_channels.append((reader, deliver or self._from_node))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")  # listen to the new channel now, not after a poll
        return process

    def _from_node(self, message: Message) -> None:
        """A node's message: a job agent's workers noted (:attr:`parts`), then delivered."""
        self.parts.note(message)
        self.on_message(message)

    def signal(self, node: Key, sig: signal.Signals) -> bool:
        """Send ``sig`` to the node's current process; False if it is not running (ended,
        or killed here: a killed process is not signalled again while it dies)."""
        current = self._current(node)
        if current is None or current.stopped or not current.process.is_alive():
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

    def kill(self, node: Key) -> bool:
        """SIGKILL the node's current process (resuming it first if paused)."""
        return self.signal(node, signal.SIGKILL)

    def stopped(self, node: int) -> bool:
        """True while the node's current process is stopped (by SIGSTOP), per the kernel
        (False once it was killed here)."""
        current = self._current(node)
        if current is None or current.stopped or not current.process.is_alive():
            return False
        try:
            return bool(psutil.Process(current.process.pid).status() == psutil.STATUS_STOPPED)
        except psutil.Error:
            return False

    def running(self, node: int) -> bool:
        """True while the node's current process is alive."""
        current = self._current(node)
        return current is not None and current.process.is_alive()

    def live(self, node: int) -> int:
        """How many processes of the node are running and not killed here (at most one)."""
        with self._lock:
            runs = list(self._procs.get(node, ()))
        return sum(1 for inc in runs if not inc.stopped and inc.process.is_alive())

    def pids(self) -> dict[int, str]:
        """Every PID this cluster ever started, with its process's name (its role)."""
        with self._lock:
            return {i.process.pid: i.process.name for runs in self._procs.values() for i in runs}

    def close(self, grace: float = 5.0) -> list[int]:
        """Give processes ``grace`` seconds to exit, kill the rest, reap all, stop the reader.

        Every wait covers all the processes at once (one ``poll`` over their sentinels), so
        ending 1024 of them costs one wait, not 1024 (Ctrl-C must end a large run at once).

        Returns:
            The PIDs that were still running after the grace period and had to be killed.
        """
        with self._lock:
            incarnations = [i for runs in self._procs.values() for i in runs]
        running = _running_after(incarnations, grace)
        for inc in running:
            inc.stopped = True
            with contextlib.suppress(ProcessLookupError):
                os.kill(inc.process.pid, signal.SIGKILL)
        _running_after(running, _REAP_TIMEOUT)
        self._closing.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")  # the reader sees it is closing now, not after a poll
        if self._reader is not None:
            self._reader.join(_REAP_TIMEOUT)
        with self._lock:
            leftovers, self._channels, self._new_channels = list(self._channels), {}, []
        for channel in leftovers:
            channel.close()
        self._wake_r.close()
        self._wake_w.close()
        self.release()
        self.gate.close()
        self._collect_outputs()
        return [inc.process.pid for inc in running]

    def _output_path(self, key: Key) -> str:
        assert self._output_dir is not None
        name = f"node{key}" if isinstance(key, int) else key
        return os.path.join(self._output_dir.name, f"{name}.log")

    def _collect_outputs(self) -> None:
        """Keep the tail of every node's output, then delete the files."""
        if self._output_dir is None:
            return
        for key in self._procs:
            try:
                with open(self._output_path(key), "rb") as handle:
                    handle.seek(0, os.SEEK_END)
                    handle.seek(max(0, handle.tell() - _OUTPUT_TAIL))
                    tail = handle.read().decode("utf-8", "replace")
            except FileNotFoundError:
                continue
            if tail.strip():
                self.outputs[key] = tail
        self._output_dir.cleanup()
        self._output_dir = None

    # --- internals --------------------------------------------------------------------

    def _current(self, node: Key) -> _Incarnation | None:
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
                for new, deliver in fresh:
                    selector.register(new, selectors.EVENT_READ, deliver)
                if idle and self._closing.is_set():
                    return
                for ready, _ in selector.select(timeout=_POLL):
                    channel: Any = ready.fileobj
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
                        ready.data(message)

    def _ended(self, channel: Any) -> None:
        with self._lock:
            node, inc = self._channels.pop(channel)
        channel.close()
        inc.process.join(_REAP_TIMEOUT)
        if not inc.stopped:  # a process the harness killed has its outcome already
            inc.stopped = True
            code = inc.process.exitcode
            if inc.on_exit is not None:
                inc.on_exit(code)
                return
            assert isinstance(node, int), f"process {node!r} ended with no on_exit to report it"
            why = f"the node process exited with code {code} without reporting an outcome"
            self.on_message(Exit(node, time.monotonic(), why, code))


def _running_after(incarnations: list[_Incarnation], timeout: float) -> list[_Incarnation]:
    """Wait up to ``timeout`` seconds for the processes to end, all at once; reap those that
    did and return the others."""
    pending = {inc.process.sentinel: inc for inc in incarnations}  # a reaped one: ready
    deadline = time.monotonic() + timeout
    while pending:
        ready = wait_any(list(pending), timeout=max(0.0, deadline - time.monotonic()))
        for sentinel in ready:
            pending.pop(sentinel).process.join(0)  # reads the exit code: reaped
        if not ready or time.monotonic() >= deadline:
            break
    return list(pending.values())
