"""PackedWorld: node 0 a process of its own, the other nodes K per process as threads.

For runs too large for a process per node (4096 nodes and beyond). The network is the local
world's (:class:`~harness.world.local.LocalWorld`, whose links, toxics, names, squatter and
store rules it inherits): every node keeps its own proxy link. Node 0, the store host, is a
real process (kill and pause are SIGKILL and SIGSTOP there). Nodes ``1..N-1`` are packed
``pack`` per process, in node order (process ``g`` holds nodes ``g*K+1 .. g*K+K``), each a
thread of :mod:`harness.world.process.packed` with its own handler, sockets, events and outcome.
The processes start through the local cluster's forkserver, each when its first node starts.

Process faults on a packed node are emulated, and documented as such (docs/scenarios.md):

========  ==========================================================================
kill      every socket of the node is reset (the peer sees a RST), its handler is
          declared dead to rdzv (a restart takes its claim over), its thread is
          abandoned: nothing it does later is delivered, and it never connects again
pause     both directions of the node's link hold their data (a ``latency`` toxic of a
          year; removing it hands on what it held, in order) -- the node's own clock and
          code go on; a node launched paused waits in its thread until resumed
restart   a new incarnation (a new thread in the same process), same node id and rank;
          one still live is killed first (a node is one incarnation at a time)
========  ==========================================================================

Every node's report says where it ran (``placement``); the maxrss a packed node reports is
its process's.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final

from harness.proxy.client import ToxiproxyClient
from harness.world.base import JOBS, PAUSE, Launch, Layout, OnMessage, cannot
from harness.world.incarnations import HeldNodes, Incarnations
from harness.world.local import LOCAL_CAPABILITIES, LocalWorld
from harness.world.messages import Exit, Message
from harness.world.process.node import NodeSpec
from harness.world.process.packed import serve
from harness.world.proxied.links import HOLD_MS, PAUSE_TOXIC

__all__ = [
    "HOLD_MS",
    "PACKED_CAPABILITIES",
    "PAUSE_TOXIC",
    "PackedWorld",
    "PackedWorlds",
    "placement",
]

NAME: Final = "packed"
#: The local world's, but jobs: a job node is processes (an agent and its workers), never
#: a thread of a packed process.
PACKED_CAPABILITIES: Final = LOCAL_CAPABILITIES - {JOBS}
_STREAMS: Final = ("upstream", "downstream")


def placement(pack: int) -> str:
    """The report's placement text of every packed node (node 0's is ``process``)."""
    return (
        f"packed: {pack} nodes per process as threads (kill, pause emulated; "
        "maxrss is the process's)"
    )


@dataclass(frozen=True)
class PackedWorlds:
    """Makes a :class:`PackedWorld` per run, ``pack`` nodes per process, links on ``client``."""

    client: ToxiproxyClient
    pack: int
    name: str = NAME
    capabilities: frozenset[str] = PACKED_CAPABILITIES

    def __call__(self, layout: Layout, on_message: OnMessage) -> PackedWorld:
        return PackedWorld(layout, self.client, on_message, self.pack)


@dataclass(eq=False)
class _Process:
    """One packed process: its command pipe (the harness's end)."""

    commands: Any
    nodes: range
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def send(self, command: tuple[Any, ...]) -> bool:
        with self.lock:
            if self.closed:
                return False
            try:
                self.commands.send(command)
            except OSError:
                return False
            return True

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.closed = True
                self.commands.close()


class PackedWorld(LocalWorld):
    """The nodes of one run, packed; see the module docstring."""

    name = NAME
    capabilities: frozenset[str] = PACKED_CAPABILITIES

    def __init__(
        self, layout: Layout, client: ToxiproxyClient, on_message: OnMessage, pack: int
    ) -> None:
        if pack < 2:
            raise ValueError(f"pack must be at least 2 nodes per process, got {pack}")
        super().__init__(layout, client, on_message)
        self.pack = pack
        self._on_message = on_message
        self._placement = placement(pack)
        self._processes: dict[int, _Process] = {}
        self._book = Incarnations()
        self._held = HeldNodes(self._book, self._send, self._hold, self._unhold)
        self._lock = threading.Lock()
        self._stopping = False

    # --- nodes ------------------------------------------------------------------------

    def group(self, node: int) -> int:
        """The packed process node ``node`` runs in (node 0: none, it is its own)."""
        return (node - 1) // self.pack

    def start(self, launch: Launch) -> None:
        node = launch.node
        if node == 0:
            super().start(launch)
            return
        process = self._process(self.group(node))
        inc, before = self._book.begin(node, frozen=launch.start_paused)
        if before is not None:  # one incarnation at a time: the one still live ends first
            self._held.end(before)
        spec = NodeSpec(launch, self.topo.endpoint(node))
        if not process.send(("start", inc.number, spec)):
            inc.ended = True
            self._on_message(_exit(node, "the packed process was already stopped"))

    def kill(self, node: int) -> bool:
        return super().kill(node) if node == 0 else self._held.kill(node)

    def pause(self, node: int) -> bool:
        return super().pause(node) if node == 0 else self._held.pause(node)

    def resume(self, node: int) -> bool:
        return super().resume(node) if node == 0 else self._held.resume(node)

    def paused(self, node: int) -> bool:
        return super().paused(node) if node == 0 else self._held.paused(node)

    def kill_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part} (a packed node is a thread)")

    def pause_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part} (a packed node is a thread)")

    def resume_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part} (a packed node is a thread)")

    def live(self, node: int) -> int:
        if node == 0:
            return super().live(node)
        return self._book.live(node)

    def output(self, node: int) -> str | None:
        if node == 0:
            return super().output(node)
        return self.cluster.outputs.get(_key(self.group(node)))

    def stop_nodes(self, grace: float) -> None:
        with self._lock:
            self._stopping = True
            processes = list(self._processes.values())
        for process in processes:  # EOF: each ends once its live node threads have
            process.close()
        super().stop_nodes(grace)

    # --- internals --------------------------------------------------------------------

    def _send(self, node: int, command: tuple[str, int]) -> bool:
        return self._processes[self.group(node)].send(command)

    def _hold(self, node: int) -> None:
        if node not in self.topo.proxies:
            raise cannot(self.name, PAUSE, "a packed node is paused on its link, and it has none")
        for stream in _STREAMS:
            self.links.client_of(node).add_toxic(  # its share's proxy
                self.topo.proxies[node],
                "latency",
                stream=stream,
                name=f"{PAUSE_TOXIC}-{stream}",
                attributes={"latency": HOLD_MS},
            )

    def _unhold(self, node: int) -> None:
        for stream in _STREAMS:
            with contextlib.suppress(Exception):  # already gone with the link
                self.links.client_of(node).remove_toxic(
                    self.topo.proxies[node], f"{PAUSE_TOXIC}-{stream}"
                )

    def _process(self, group: int) -> _Process:
        with self._lock:
            found = self._processes.get(group)
            if found is not None:
                return found
            first = group * self.pack + 1
            nodes = range(first, min(first + self.pack, self.layout.nodes))
            reader, writer = self.cluster.ctx.Pipe(duplex=False)
            try:
                self.cluster.spawn(
                    _key(group),
                    f"rdzv-pack-{group}",
                    serve,
                    (reader, self.topo.dns_shim(first), self._placement, self.cluster.gate),
                    deliver=self._deliver,
                    on_exit=lambda code: self._process_ended(nodes, code),
                )
            except BaseException:
                writer.close()
                raise
            finally:
                reader.close()  # the child has its own copy
            process = self._processes[group] = _Process(writer, nodes)
            return process

    def _deliver(self, item: tuple[int, Message]) -> None:
        number, message = item
        if self._book.deliverable(number, message):
            self._on_message(message)

    def _process_ended(self, nodes: range, code: int | None) -> None:
        for inc in self._book.lose(nodes):
            why = (
                f"the packed process of nodes {nodes.start}-{nodes.stop - 1} exited with "
                f"code {code} before this node reported an outcome"
            )
            self._on_message(_exit(inc.node, why, code))


def _key(group: int) -> str:
    return f"pack{group}"


def _exit(node: int, why: str, code: int | None = None) -> Exit:
    return Exit(node, time.monotonic(), why, code)
