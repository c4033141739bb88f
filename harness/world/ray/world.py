"""RayWorld: the nodes of one run as Ray actors, packed, spread over the cluster's hosts.

Node 0 (the store host) is an actor of its own; nodes ``1..N-1`` are packed K per actor in
node order (group ``g >= 1`` holds nodes ``(g-1)*K+1 .. g*K``), each node a thread as in a
packed process (:mod:`harness.world.process.packed`, run by
:class:`~harness.world.ray.actors.NodeGroup`). One placement group of a bundle per actor,
``SPREAD``, spreads the actors over the hosts; node 0's store binds its own host's address.
The links are on a proxy agent per host (:mod:`harness.world.ray.network`). Node messages
come back through a long poll on every actor (one thread here waits on all of them), and
their times are converted from the actor's host clock to this machine's.

Process faults map onto the actor:

=======  ================================================================================
group    kill, pause, restart
=======  ================================================================================
1 node   real: ``ray.kill`` of the actor (its process), SIGSTOP/SIGCONT of the actor's
         process sent by its host's agent, a new actor in the same bundle
K nodes  emulated as in the packed world: sockets reset and the thread abandoned; both
         directions of the node's link held; a new thread in the same actor
=======  ================================================================================

Node 0 is always alone, so a killed store host is a killed process. Each node's
``placement`` names its actor's kind and host. Names (DNS), squatters and store rules are
not offered: scenarios that need them are reported unsupported here.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

import ray

from harness.errors import HarnessError
from harness.world.base import (
    BANDWIDTH,
    JOBS,
    NAMES,
    PACKETS,
    PAUSE,
    SQUATTER,
    STORE_RULES,
    Launch,
    Layout,
    OnMessage,
    PacketRule,
    StoreRule,
    ToxicSpec,
    cannot,
    is_ip,
)
from harness.world.incarnations import HeldNodes, Incarnation, Incarnations
from harness.world.messages import Exit, Message, shifted
from harness.world.process.backends import preload
from harness.world.process.node import NodeSpec
from harness.world.proxied.links import HOLD_MS, PAUSE_TOXIC
from harness.world.ray.capabilities import CAPS, NAME
from harness.world.ray.cluster import Placement
from harness.world.ray.groups import Group, default_pack, plan
from harness.world.ray.network import RayNetwork
from harness.world.ray.pump import Pump
from harness.world.ray.session import RaySession, connect
from harness.world.ray.steps import announce
from harness.world.ray.waits import Waits

__all__ = ["RayWorld", "RayWorlds"]

_RELEASE_WAIT: Final = 60.0  # seconds for the actors to open their start gates
_START_WAIT: Final = 120.0  # seconds for an actor to start a node (it may be coming up)
_END_WAIT: Final = 30.0  # seconds for a killed actor's process to exit (SIGKILL: at once)
_KERNEL: Final = "the harness sets no kernel rules on a cluster's hosts; the netns world can"


@dataclass(frozen=True)
class RayWorlds:
    """Makes a :class:`RayWorld` per run: ``pack`` nodes per actor (None: one actor per
    node up to 17 nodes, else 16 groups), on the Ray this process is connected to (else
    a local Ray started for the run and stopped with it)."""

    pack: int | None = None
    name: str = NAME
    capabilities: frozenset[str] = CAPS

    def __call__(self, layout: Layout, on_message: OnMessage) -> RayWorld:
        return RayWorld(layout, on_message, self.pack)


class RayWorld:
    """The nodes of one run as Ray actors; see the module docstring."""

    name = NAME
    capabilities = CAPS

    def __init__(self, layout: Layout, on_message: OnMessage, pack: int | None = None) -> None:
        if pack is not None and pack < 1:
            raise ValueError(f"pack must be at least 1 node per actor, got {pack}")
        self.layout = layout
        self.pack = default_pack(layout.nodes, pack)
        self._on_message = on_message
        self._session: RaySession | None = None
        self._waits = Waits()
        self._place = Placement(layout.tag, self._waits)
        self.groups: list[Group] = plan(layout.nodes, self.pack)
        self.network: RayNetwork | None = None
        self._store: tuple[str, int] = ("", 0)
        self._book = Incarnations()
        self._held = HeldNodes(self._book, self._send, self._hold, self._unhold, self._end)
        self._pump = Pump(self._deliver, self._group_lost)
        self._leftovers: list[str] = []
        self._spares: dict[str, Any] = {}  # Ray node id -> a one-node actor started ahead
        self._stopping = False
        self._torn_down = False
        self._released = False

    # --- lifecycle --------------------------------------------------------------------

    def interrupt_on(self, stop: threading.Event) -> None:
        """Give up any wait on Ray (building, starting, releasing) once ``stop`` is set,
        within a fraction of a second, raising RunInterrupted; teardown cleans up."""
        self._waits.stop = stop

    def build(self, seed: int) -> None:
        self._session = connect()
        try:
            self._waits.check("the ray world was built")
            self._build(seed)
        except BaseException:
            self.teardown()
            raise

    def _build(self, seed: int) -> None:
        if not is_ip(self.layout.host):
            raise cannot(self.name, NAMES, f"the endpoint host {self.layout.host!r} is a name")
        announce("placement-group")
        self._place.reserve(self.groups)
        for group in self.groups:
            self._place.spawn(group, store=group.index == 0)
        announce("actors")
        self.network = RayNetwork(self.layout.tag, self._place.agents(seed))
        for group in self.groups:  # a spare per host for whole-process restarts
            if group.whole and group.host not in self._spares:
                self._spares[group.host] = self._place.spare(group.index)
        announce("sync")
        for group in self.groups:
            self._ready(group)
        # Up before the release: a restart taking its claim over has MEMBER_GRACE (2 s),
        # and a Ray actor took 6-15 s to come up under load (issue 18, scenarios restart-*).
        self._place.warm(list(self._spares.values()), preload(set(self.layout.backends)))
        node0 = self.groups[0]
        port = self._waits.get(node0.actor.store_port.remote(), _RELEASE_WAIT, "the store's port")
        self._store = (self._place.addresses[node0.host], port)
        if self.layout.via_links:
            hosts = {n: self._group_of(n).host for n in range(1, self.layout.nodes)}
            self.network.connect(hosts, self._store)
        announce("start")

    def _replace(self, group: Group) -> None:
        """Kill ``group``'s actor; its host's spare takes its place (warm, for a restart),
        and a new spare starts in the group's bundle (what the killed actor held)."""
        with group.lock:
            pid = 0 if group.dead else group.pid  # died on its own: its pid is not ours
            self._place.kill(group)  # dead from now on: the pump reports no loss of it
            self._end_process(group, pid)
            spare = self._spares.pop(group.host, None)
            if spare is None:
                self._place.spawn(group, store=False)
            else:
                self._place.adopt(group, spare)
            if self._released:  # its nodes must not wait at a gate that opened before
                self._waits.get(group.actor.release.remote(), _RELEASE_WAIT, "a start gate")
            if not self._stopping:
                self._spares[group.host] = self._place.spare(group.index)

    def _drop_spares(self) -> None:
        """No more restarts: end the spares (and start none from now on)."""
        self._stopping = True
        for group in self.groups:
            with group.lock:  # not while a kill hands a spare over
                pass
        for spare in self._spares.values():
            ray.kill(spare, no_restart=True)
        self._spares.clear()

    def _ready(self, group: Group) -> None:
        """Wait for ``group``'s new actor, then bring its messages home."""
        self._place.sync(group)
        self._pump.watch(group)
        group.synced = True

    def stop_nodes(self, grace: float) -> None:
        self._drop_spares()
        for group in self.groups:
            if not group.synced:  # a successor never used: no node of the run in it
                self._place.kill(group)
        live = [g for g in self.groups if g.actor is not None and not g.dead]
        for group in live:
            group.actor.close.remote()
        ended = self._pump.wait_ended(live, grace)
        for group in live:
            if group not in ended:
                nodes = f"{group.nodes.start}-{group.nodes.stop - 1}"
                self._leftovers.append(f"actor of nodes {nodes} (pid {group.pid})")
            self._place.kill(group)

    def teardown(self) -> list[str]:
        if self._torn_down:
            return []
        self._torn_down = True
        problems: list[str] = []
        try:
            self._drop_spares()
            for group in self.groups:
                self._place.kill(group)
            self._pump.stop()
            if self.network is not None:
                problems += self.network.teardown()
            problems += self._place.release()
        finally:
            if self._session is not None:
                self._session.close()
        if self._leftovers:
            problems.insert(0, f"node actors still running at the end: {self._leftovers}")
        return problems

    # --- nodes ------------------------------------------------------------------------

    def _group_of(self, node: int) -> Group:
        return self.groups[0 if node == 0 else (node - 1) // self.pack + 1]

    def _endpoint(self, node: int) -> str:
        link = self.network.endpoint(node) if self.network is not None else None
        if link is not None:
            return link
        address, port = self._store
        return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"

    def start(self, launch: Launch) -> None:
        node = launch.node
        group = self._group_of(node)
        before = self._book.running(node)
        if before is not None:  # one incarnation at a time: the one still live ends first
            self._end(before)
        with group.lock:
            if group.dead:  # its actor died on its own: a new one in its bundle
                self._place.spawn(group, store=False)
            if not group.synced:  # a new actor (spawned at its predecessor's kill)
                self._ready(group)
        inc, _ = self._book.begin(node, frozen=launch.start_paused)
        spec = NodeSpec(launch, self._endpoint(node))
        started = group.actor.command.remote(("start", inc.number, spec))
        if not self._waits.get(started, _START_WAIT, f"node {node} to start"):
            inc.ended = True
            self._on_message(_exit(node, "its Ray actor was already closed"))

    def release(self) -> None:
        """Open every group's start gate (one call per actor, all at once); a group made
        later (a restart) is released when it takes its place."""
        self._released = True
        announce("release")
        gates = [group.actor.release.remote() for group in self.groups]
        self._waits.get(gates, _RELEASE_WAIT, "the start gates to open")
        announce("running")

    def kill(self, node: int) -> bool:
        return self._held.kill(node)

    def _end(self, inc: Incarnation) -> None:
        """Kill incarnation ``inc``: its actor when it is alone in it, else as a packed node."""
        group = self._group_of(inc.node)
        if group.whole:
            inc.killed = True  # from now on nothing it sends is delivered
            self._replace(group)
            return
        self._held.end(inc)

    def pause(self, node: int) -> bool:
        return self._held.pause(node)

    def resume(self, node: int) -> bool:
        return self._held.resume(node)

    def paused(self, node: int) -> bool:
        return self._held.paused(node)

    def kill_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part}")

    def pause_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part}")

    def resume_part(self, node: int, part: str) -> bool:
        raise cannot(NAME, JOBS, f"node {node}'s {part}")

    def _send(self, node: int, command: tuple[str, int]) -> None:
        self._group_of(node).actor.command.remote(command)

    def _hold(self, node: int) -> None:
        """Pause ``node``: SIGSTOP when it is alone in its actor, else hold its link."""
        if self._group_of(node).whole:
            self._signal(self._group_of(node), signal.SIGSTOP)
        elif node in self._network().links:
            self._network().hold(node, PAUSE_TOXIC, HOLD_MS)
        else:
            raise cannot(self.name, PAUSE, "a packed node is paused on its link, and it has none")

    def _unhold(self, node: int) -> None:
        if self._group_of(node).whole:
            self._signal(self._group_of(node), signal.SIGCONT)
        else:
            self._network().unhold(node, PAUSE_TOXIC)

    def live(self, node: int) -> int:
        return self._book.live(node)

    def _end_process(self, group: Group, pid: int) -> None:
        """SIGKILL ``group``'s actor process ``pid`` through its host's agent and wait until
        it has exited: ``ray.kill`` returns before the process ends, and a paused actor
        outlived it and claimed its rank beside its replacement (issue 30 on Ray)."""
        if pid <= 0:
            return
        agent = self._network().agents[group.host]
        if not ray.get(agent.actor.end.remote(pid, _END_WAIT), timeout=_END_WAIT + 60):
            first, last = group.nodes.start, group.nodes.stop - 1
            raise HarnessError(
                f"the Ray actor of nodes {first}-{last} (pid {pid}) did not exit within "
                f"{_END_WAIT:g} s of SIGKILL"
            )

    def _signal(self, group: Group, signum: int) -> None:
        agent = self._network().agents[group.host]
        ray.get(agent.actor.signal.remote(group.pid, int(signum)), timeout=60)

    def _network(self) -> RayNetwork:
        if self.network is None:
            raise HarnessError("the ray world was used before build() made its network")
        return self.network

    def _deliver(self, group: Group, items: list[tuple[int, Message]]) -> None:
        for number, message in items:
            if self._book.deliverable(number, message):
                self._on_message(shifted(message, -group.offset))  # the actor's clock, to ours

    def _group_lost(self, group: Group, why: str) -> None:
        for inc in self._book.lose(group.nodes):
            self._on_message(_exit(inc.node, f"its Ray actor died: {why}"))

    # --- links, names, the store ------------------------------------------------------

    def add_toxic(self, nodes: Any, toxic: ToxicSpec) -> Any:
        return self._network().add_toxic(nodes, toxic)

    def link_down(self, nodes: Any) -> Any:
        return self._network().link_down(nodes)

    def names_down(self) -> Any:
        raise cannot(self.name, NAMES, "nodes on a cluster resolve names with their hosts")

    def squatter(self) -> Any:
        raise cannot(self.name, SQUATTER)

    def add_store_rule(self, rule: StoreRule) -> None:
        raise cannot(self.name, STORE_RULES)

    def add_packet_rule(self, rule: PacketRule) -> Any:
        raise cannot(self.name, PACKETS, _KERNEL)

    def limit_bandwidth(self, nodes: Any, rate_kbit: int, direction: str) -> Any:
        raise cannot(self.name, BANDWIDTH, _KERNEL)

    def output(self, node: int) -> str | None:
        return None  # an actor's output stays in Ray's logs on its host

    def link_log(self) -> list[dict[str, Any]] | None:
        return None if self.network is None else self.network.log()


def _exit(node: int, why: str) -> Exit:
    return Exit(node, time.monotonic(), why)
