"""A packed process: several nodes of one run as threads, each with its own everything.

:func:`serve` is the entry point of each process of the packed world
(:mod:`harness.world.packed`), started through the local cluster's forkserver. The harness
sends it commands -- ``("start", incarnation, NodeSpec)``, ``("kill", incarnation)``,
``("resume", incarnation)`` -- and closes the command pipe at the end of the run; every node
thread runs :func:`~harness.world.process.node.run_node` with its own queue, handler, sockets and
link, and its messages go back on the process's one channel as ``(incarnation, message)``.

Which node a thread belongs to is an attribute of its ``threading.Thread``; a thread started
by a node's thread (rdzv's DNS lookups) inherits it. Installed once per process:

* a ``socket.socket`` subclass that records every socket a node's threads make (the
  standard library looks ``socket.socket`` up at call time: ``create_connection``,
  ``accept``), and stops a killed node's threads at their next socket or connect;
* one log handler that routes rdzv's events to the queue of the node whose thread logged;
* the DNS shim, counting failed lookups per node;
* the start gate (:class:`_Gate`): node threads wait on the world's gate pipe, and once one
  has seen the release it waits until every thread waiting with it has seen it too.

Process faults are emulated, honestly (docs/scenarios.md, "Packed nodes"):

* kill: the incarnation is marked dead (nothing it sends is delivered any more), its handler
  is declared dead to rdzv (:meth:`~rdzv.rendezvous.static.StaticTCPRendezvous.declare_dead`,
  so a restart takes its claim over), and every socket it made is reset: ``SO_LINGER`` 0,
  then ``connect(AF_UNSPEC)`` (Linux), which sends the peer a RST and wakes a thread
  blocked on it without freeing the descriptor (no other thread can get its number). The
  thread is abandoned: its next socket or connect blocks forever.
* pause of a node launched paused: its thread waits (the process is not stopped) until
  ``resume``. A pause later on is the world's business (its link holds the data).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import socket
import struct
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from harness.world.messages import Event, Message
from harness.world.process.dns import DnsShim, install_dns_shim
from harness.world.process.gate import wait_gate
from harness.world.process.node import Hosting, NodeSpec, run_node
from harness.world.process.reporting import PipeReporter, redirect_output
from rdzv.events import EVENT_ATTR

__all__ = ["host", "serve"]

#: Stack of each node thread (virtual; only the pages touched count as memory).
_STACK_BYTES: Final = 512 * 1024
_NODE_ATTR: Final = "_harness_node"
#: Never set: what a killed node's thread waits on, for good.
_NEVER: Final = threading.Event()
_LINGER_NOW: Final = struct.pack("ii", 1, 0)


@dataclass(eq=False)
class _Node:
    """One incarnation of a node in this process."""

    number: int
    spec: NodeSpec
    channel: PipeReporter
    killed: bool = False
    handler: Any = None
    resumed: threading.Event = field(default_factory=threading.Event)
    sockets: weakref.WeakSet[socket.socket] = field(default_factory=weakref.WeakSet)
    lock: threading.Lock = field(default_factory=threading.Lock)
    thread: threading.Thread | None = None

    @property
    def node(self) -> int:
        return self.spec.node

    def put(self, message: Message) -> None:
        """The node's queue: dropped once the node is killed (a dead node says nothing)."""
        if not self.killed:
            self.channel.put((self.number, message))

    def adopt(self, handler: Any) -> None:
        with self.lock:
            self.handler = handler
            killed = self.killed
        if killed:
            _declare_dead(handler)

    def freeze(self) -> None:
        self.resumed.wait()

    def admit(self) -> None:
        """A killed node's thread goes no further (it never acts again)."""
        if self.killed:
            _NEVER.wait()

    def track(self, sock: socket.socket) -> None:
        with self.lock:
            killed = self.killed
            if not killed:
                self.sockets.add(sock)
        if killed:
            _reset(sock)
            _NEVER.wait()

    def kill(self) -> None:
        with self.lock:
            self.killed = True
            handler, sockets = self.handler, list(self.sockets)
        if handler is not None:
            _declare_dead(handler)
        for sock in sockets:
            _reset(sock)


def _declare_dead(handler: Any) -> None:
    """Tell rdzv the handler's "process" is dead (other backends have no such notion)."""
    declare = getattr(handler, "declare_dead", None)
    if callable(declare):
        with contextlib.suppress(Exception):
            declare()


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _reset(sock: socket.socket) -> None:
    """Reset ``sock``'s connection (the peer sees a RST) without closing its descriptor."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NOW)
    fd = sock.fileno()
    if fd < 0:
        return
    unspec = ctypes.create_string_buffer(16)  # a sockaddr whose family is AF_UNSPEC (0)
    if _libc().connect(fd, unspec, len(unspec)) != 0:  # not TCP (or not Linux): at least end it
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def current() -> _Node | None:
    """The node the calling thread belongs to (None: the process's own threads)."""
    node: _Node | None = getattr(threading.current_thread(), _NODE_ATTR, None)
    return node


class _NodeSocket(socket.socket):
    """``socket.socket`` in a packed process: a node's sockets are its own, and die with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        node = current()
        if node is not None:
            node.admit()
        super().__init__(*args, **kwargs)
        if node is not None:
            node.track(self)

    def connect(self, address: Any) -> None:
        node = current()
        if node is not None:
            node.admit()
        super().connect(address)

    def connect_ex(self, address: Any) -> int:
        node = current()
        if node is not None:
            node.admit()
        return super().connect_ex(address)


class _Route(logging.Handler):
    """rdzv's structured events, to the queue of the node whose thread logged them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)

    def handle(self, record: logging.LogRecord) -> bool:
        # Without the handler's lock: it would make every node thread of the process queue
        # behind one another; each write to the channel is whole already (its own lock).
        self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, EVENT_ATTR, None)
        node = current()
        if node is not None and isinstance(payload, dict):
            fields = {k: v for k, v in payload.items() if k != "event"}
            node.put(Event(node.node, time.monotonic(), payload["event"], fields))


def _node_of_thread() -> int | None:
    node = current()
    return None if node is None else node.node


def _install(dns: DnsShim | None) -> None:
    """Make this process host nodes: sockets, threads, logs, DNS (once, at start)."""
    if socket.socket is _NodeSocket:
        return  # installed already: host() ran before in this process
    socket.socket = _NodeSocket  # type: ignore[misc]
    start = threading.Thread.start

    def inherit(thread: threading.Thread) -> None:
        if getattr(thread, _NODE_ATTR, None) is None:
            setattr(thread, _NODE_ATTR, current())
        start(thread)

    threading.Thread.start = inherit  # type: ignore[method-assign,assignment]
    route = _Route()
    for name in ("rdzv", "torch.distributed"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(route)
        logger.propagate = False
    if dns is not None:
        install_dns_shim(dns, _node_of_thread)
    threading.stack_size(_STACK_BYTES)


class _Gate:
    """The world's start gate, for the node threads of this process.

    Every node thread waits on the gate pipe (:func:`~harness.world.process.gate.wait_gate`), notes
    when it saw the release, then waits until every thread that was waiting with it has seen
    it too: the first threads to get the GIL after the release would otherwise run their
    nodes' work, holding the GIL for whole switch intervals, while the others had not yet
    seen the release. Threads started after the release pass at once.
    """

    #: A thread never waits longer than this for the others (a liveness bound only).
    LIMIT: Final = 5.0

    def __init__(self, gate: Any) -> None:
        self._gate = gate
        self._lock = threading.Lock()
        self._waiting = 0
        self._all_seen = threading.Event()

    def wait(self) -> float:
        if self._gate is None:
            return time.monotonic()
        with self._lock:
            self._waiting += 1
            if self._waiting == 1:
                self._all_seen.clear()
        seen = wait_gate(self._gate)
        with self._lock:
            self._waiting -= 1
            last = self._waiting == 0
        if last:
            self._all_seen.set()
        else:
            self._all_seen.wait(self.LIMIT)
        return seen


def _forwarded(node: int, queue: Any) -> None:
    return None  # the process's one router does it


def _no_dns(shim: DnsShim) -> None:
    return None  # installed once for the process


def serve(
    channel: Any,
    output_path: str,
    commands: Any,
    dns: DnsShim | None,
    placement: str,
    gate: Any = None,
) -> None:
    """Entry point of a packed process (see the module docstring); returns once the command
    pipe is closed and every node thread that was not killed has ended. Its node threads
    wait at the world's start ``gate`` (see :class:`_Gate`)."""
    redirect_output(output_path)
    host(channel, commands, dns, placement, gate)


def host(
    channel: Any, commands: Any, dns: DnsShim | None, placement: str, gate: Any = None
) -> None:
    """Host nodes in this process until ``commands`` ends, as :func:`serve` does, without
    touching the process's output or signals (what a Ray actor runs on a thread of its own).

    ``channel`` has ``send(item)`` and ``close()``; ``commands`` has ``recv()``, raising
    ``EOFError`` once no command will come. Install happens once per process. The node
    threads wait at ``gate`` (None: no gate, they go on at once).
    """
    _install(dns)
    reporter = PipeReporter(channel)
    release = _Gate(gate)
    nodes: dict[int, _Node] = {}
    try:
        for command in _commands(commands):
            what, number = command[0], command[1]
            if what == "start":
                nodes[number] = _start(number, command[2], reporter, placement, release)
            elif what == "kill" and number in nodes:
                nodes[number].kill()
            elif what == "resume" and number in nodes:
                nodes[number].resumed.set()
        for node in nodes.values():
            if not node.killed and node.thread is not None:
                node.thread.join()
    finally:
        sys.stdout.flush()
        channel.close()


def _commands(commands: Any) -> Iterator[tuple[Any, ...]]:
    while True:
        try:
            yield commands.recv()
        except (EOFError, OSError):
            return


def _start(number: int, spec: NodeSpec, reporter: PipeReporter, placement: str, gate: Any) -> _Node:
    node = _Node(number, spec, reporter)
    hosting = Hosting(
        freeze=node.freeze,
        forward=_forwarded,
        dns=_no_dns,
        adopt=node.adopt,
        placement=placement,
        gate=gate.wait,
    )
    thread = threading.Thread(
        target=run_node,
        args=(spec, node, hosting),
        name=f"node-{spec.node}#{number}",
        daemon=True,
    )
    setattr(thread, _NODE_ATTR, node)
    node.thread = thread
    thread.start()
    return node
