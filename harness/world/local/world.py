"""LocalWorld: nodes as OS processes on this machine, their links through a fault proxy.

The first :class:`~harness.world.base.World`, and the default. Nodes are processes started
by :class:`~harness.world.process.cluster.LocalCluster`; the network is a
:class:`~harness.world.local.topology.Topology` on loopback: node 0's port (bound by the harness,
handed over), one Toxiproxy-API link per other node (the embedded proxy or a real
Toxiproxy, driven through :class:`~harness.proxy.client.ToxiproxyClient`), a DNS shim when
the endpoint host is a name, a store-fault interposer when store rules are wanted.

The verbs map onto that: kill/pause/resume are SIGKILL/SIGSTOP/SIGCONT; toxics and
link down/up are proxy API calls, counted from the proxy's event log afterwards; names
down/up switch the shims' shared flag. It can do everything
:data:`~harness.world.base.CAPABILITIES` names but what needs the kernel's packet rules and
traffic control (``packets``, ``bandwidth``: the netns world's).

Every process this world starts is tracked by PID and ended here; every port it opened is
checked after teardown (:mod:`harness.world.process.leaks`): a port still listened on by
this process or one it started is reported as a leak (another program on the machine may
bind a port the run gave back: that is not the run's).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError
from harness.proxy.client import ToxiproxyClient
from harness.world.base import (
    BANDWIDTH,
    CAPABILITIES,
    PACKETS,
    SQUATTER,
    Launch,
    Layout,
    OnMessage,
    PacketRule,
    StoreRule,
    ToxicSpec,
    cannot,
)
from harness.world.local.topology import Topology
from harness.world.process.cluster import LocalCluster
from harness.world.process.dns import NameDown, names_down
from harness.world.process.leaks import leaks, ours
from harness.world.process.node import NodeSpec
from harness.world.process.nodes import ProcessNodes
from harness.world.proxied.links import ProxiedLink, ProxiedToxic, ProxyLinks
from harness.world.proxied.squatters import Squatter

__all__ = [
    "LOCAL_CAPABILITIES",
    "NO_EVENT_LOG",
    "LocalWorld",
    "LocalWorlds",
]

NAME = "local"
#: Why the effects of toxics and link downs are not counted on a real Toxiproxy.
NO_EVENT_LOG = "not counted: the proxy keeps no event log (a real Toxiproxy has none)"
_HELD = "starts of node 0 while the port was held"
#: What the local (and packed) world can do: no kernel packet rules or traffic control.
LOCAL_CAPABILITIES = frozenset(CAPABILITIES) - {PACKETS, BANDWIDTH}
_ON_LOOPBACK = "every node shares this machine's loopback; the netns world (--world netns) can"


@dataclass(frozen=True)
class LocalWorlds:
    """Makes a :class:`LocalWorld` per run, its links on the proxy ``client`` drives."""

    client: ToxiproxyClient
    name: str = NAME
    capabilities: frozenset[str] = LOCAL_CAPABILITIES

    def __call__(self, layout: Layout, on_message: OnMessage) -> LocalWorld:
        return LocalWorld(layout, self.client, on_message)


class LocalWorld(ProcessNodes):
    """The nodes of one run as local processes; see the module docstring."""

    name = NAME
    capabilities: frozenset[str] = LOCAL_CAPABILITIES

    def __init__(self, layout: Layout, client: ToxiproxyClient, on_message: OnMessage) -> None:
        self.layout = layout
        self.client = client
        self.cluster = LocalCluster(on_message=on_message, backends=layout.backends)
        self.topo = Topology(layout, client, self.cluster.ctx)
        self._squatter: _Squatter | None = None
        self.links = ProxyLinks(client, self.topo.proxies, NO_EVENT_LOG, self.topo.routes)
        self._leftovers: list[int] = []
        self._abandoned = False

    # --- lifecycle --------------------------------------------------------------------

    def build(self, seed: int) -> None:
        try:
            self.client.set_seed(seed)
        except Exception:
            pass
        else:  # the embedded proxy: more links than one holds go to proxy processes
            self.topo.proxy_seed = seed
        self.topo.build()
        if self.topo.squatter is not None:
            self._squatter = _Squatter(self.topo.squatter)

    def stop_nodes(self, grace: float) -> None:
        # grace 0: the run is being abandoned (Ctrl-C, an error): nothing will be judged
        self._abandoned = grace <= 0.0
        self._leftovers = self.cluster.close(grace=grace)

    def teardown(self) -> list[str]:
        self.links.over = True
        self.links.log()  # kept now: the proxy processes' logs go with them in the teardown
        problems = self.topo.teardown()
        if self._abandoned:  # no leak hunt: psutil's scan of every socket takes ~0.5 s
            return problems  # at 1024 nodes, and an interrupted run must end at once
        started = self.cluster.pids()
        owners = ours(started)
        return leaks(self._leftovers, self.topo.ports(), problems, self._threads(), owners, started)

    def _threads(self) -> list[threading.Thread]:
        """The threads this world started (node messages, store faults, a squatter)."""
        owners = (self.cluster, self.topo.store_faults, self.topo.squatter)
        found = [getattr(owner, name, None) for owner in owners for name in ("_reader", "_thread")]
        return [thread for thread in found if isinstance(thread, threading.Thread)]

    # --- nodes ------------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        node = launch.node
        sock = self.topo.take_listen_socket() if node == 0 else None
        if node == 0 and self._squatter is not None:
            self._squatter.node0_started()
        spec = NodeSpec(launch, self.topo.endpoint(node), dns=self.topo.dns_shim(node))
        try:
            self.cluster.start(spec, sock)
        finally:
            if sock is not None:
                sock.close()  # node 0 has its own copy; the port dies with node 0

    # --- links, names, the store ------------------------------------------------------

    def add_toxic(self, nodes: Sequence[int], toxic: ToxicSpec) -> ProxiedToxic:
        return self.links.add_toxic(nodes, toxic)

    def link_down(self, nodes: Sequence[int]) -> ProxiedLink:
        return self.links.link_down(nodes)

    def names_down(self) -> NameDown:
        return names_down(self.topo.endpoint_name, self.layout.host)

    def squatter(self) -> _Squatter:
        if self._squatter is None:
            raise cannot(self.name, SQUATTER, "the layout asked for no squatter")
        return self._squatter

    def add_store_rule(self, rule: StoreRule) -> None:
        if self.topo.store_faults is None:
            raise HarnessError("add_store_rule: the layout asked for no store rules")
        self.topo.store_faults.add_rule(rule)

    def add_packet_rule(self, rule: PacketRule) -> Any:
        raise cannot(self.name, PACKETS, _ON_LOOPBACK)

    def limit_bandwidth(self, nodes: Sequence[int], rate_kbit: int, direction: str) -> Any:
        raise cannot(self.name, BANDWIDTH, _ON_LOOPBACK)

    def link_log(self) -> list[dict[str, Any]] | None:
        """The proxy's events of every link a toxic or link_down acted on, in order (read
        once, after teardown; None when the proxy keeps no log)."""
        return self.links.log()


@dataclass
class _Squatter:
    listener: Squatter
    released: bool = False
    held_starts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def node0_started(self) -> None:
        with self._lock:
            if not self.released:
                self.held_starts += 1

    def release(self) -> None:
        with self._lock:
            self.released = True
        self.listener.release()

    @property
    def acted(self) -> dict[str, int]:
        counts = {_HELD: self.held_starts} if self.held_starts else {}
        return {**counts, **self.listener.acted}
