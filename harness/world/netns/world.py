"""NetnsWorld: every node its own host, on a virtual network, faults in the kernel.

Each node is a process (the local world's forkserver and node entry) that enters a network
namespace of its own before it does anything (:mod:`~harness.world.netns.enter`); the
namespaces hang off a bridge in a namespace of its own (:mod:`~harness.world.netns.network`),
each node with its own address from 198.18.0.0/15. Node 0 serves the store at its own
address, port :data:`~harness.world.netns.naming.SERVE_PORT`; the endpoint the nodes are
told is that address -- or, when the scenario's endpoint host is a name, that name, which
each node process resolves through the local world's DNS shim (so ``names_down`` works as
there), or, when it is an address of 198.19.0.0/16, node 0's second address on a network
the others have no route to.

Verbs: kill/pause/resume/restart are signals, as in the local world; ``add_packet_rule``
and ``limit_bandwidth`` are nft rules and ``tbf`` qdiscs (:mod:`~harness.world.netns.rules`),
counted by the kernel. When the scenario's faults need links (toxics, link downs) or store
rules, nodes ``1..N-1`` reach the store through proxy links or a store interposer served in
node 0's namespace (:mod:`~harness.world.netns.links`), so they and kernel rules act on the
same run; without such faults nothing starts and every node dials node 0 itself. Squatters
are not a capability of this world (a scenario that needs one is reported unsupported).

Nothing is left behind: teardown deletes the run's namespaces (and with them every veth,
bridge, address, nft table and qdisc) and reports any that remain as a leak; a run also
deletes what runs of a dead harness left (:func:`~harness.world.netns.network.sweep`).
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.errors import HarnessError, UnsupportedError
from harness.world.base import (
    BANDWIDTH,
    JOBS,
    KILL,
    LINKS,
    NAMES,
    PACKETS,
    PAUSE,
    RESTART,
    SQUATTER,
    STORE_PORT,
    STORE_RULES,
    TOXICS,
    Launch,
    Layout,
    OnMessage,
    PacketRule,
    StoreRule,
    ToxicSpec,
    cannot,
    is_ip,
)
from harness.world.netns.enter import node_entry
from harness.world.netns.links import StorePaths
from harness.world.netns.naming import SERVE_PORT, is_second_address, run_id
from harness.world.netns.network import SECOND_ADDRESS, Network, sweep
from harness.world.netns.rules import NftRule, RateLimit, Rules
from harness.world.netns.shell import why_not
from harness.world.process.cluster import LocalCluster
from harness.world.process.dns import EndpointName, NameDown, names_down
from harness.world.process.leaks import leaks
from harness.world.process.node import NodeSpec
from harness.world.process.nodes import ProcessNodes
from harness.world.proxied.links import ProxiedLink, ProxiedToxic, ProxyLinks

__all__ = ["NAME", "NETNS_CAPABILITIES", "NetnsWorld", "NetnsWorlds"]

NAME = "netns"
NETNS_CAPABILITIES = frozenset(
    {KILL, PAUSE, RESTART, NAMES, PACKETS, BANDWIDTH, TOXICS, LINKS, STORE_RULES, JOBS}
)
#: A job's workers: gloo binds the node's own address (its namespace's ``eth0``), not the
#: address its host name resolves to (the machine's, outside every namespace); the agent
#: advertises that address too (torchrun's ``--local-addr``) unless ``[job] local_addr``
#: says otherwise.
_GLOO_ON_ETH0 = {"GLOO_SOCKET_IFNAME": "eth0"}
#: What makes a run start its proxy links.
_LINKED = frozenset({TOXICS, LINKS})
_NO_SQUATTER = "node 0's port is in its own namespace, where no squatter runs (run it locally)"


@dataclass(frozen=True)
class NetnsWorlds:
    """Makes a :class:`NetnsWorld` per run."""

    name: str = NAME
    capabilities: frozenset[str] = NETNS_CAPABILITIES

    def __call__(self, layout: Layout, on_message: OnMessage) -> NetnsWorld:
        """A world for ``layout``.

        Raises:
            UnsupportedError: this machine cannot host it (not root, no ``nft``, ...).
        """
        why = why_not()
        if why is not None:
            raise UnsupportedError(why, world=NAME, capability="netns")
        return NetnsWorld(layout, on_message)


class NetnsWorld(ProcessNodes):
    """The nodes of one run, each in its own network namespace; see the module docstring."""

    name = NAME
    capabilities: frozenset[str] = NETNS_CAPABILITIES

    def __init__(self, layout: Layout, on_message: OnMessage) -> None:
        self.layout = layout
        host = layout.host
        second = host if is_second_address(host) else SECOND_ADDRESS
        self.network = Network(run_id(layout.tag), layout.nodes, second=second)
        self.rules = Rules(self.network.switch, self.network.names, self.network.address)
        self.cluster = LocalCluster(on_message=on_message, backends=layout.backends)
        self.host = self._host(host)
        self.endpoint_name: EndpointName | None = None
        if not is_ip(layout.host):
            address = self.network.address(0)
            self.endpoint_name = EndpointName(self.cluster.ctx, self.host, address, layout.nodes)
        self._leftovers: list[int] = []
        linked = layout.via_links and bool(layout.needs & _LINKED)
        self.paths: StorePaths | None = None
        if layout.nodes > 1 and (linked or layout.store_rules):
            dial = self.host if is_ip(self.host) else self.network.address(0)
            path = self.network.path(0)
            self.paths = StorePaths(
                layout.tag, layout.nodes, path, dial, SERVE_PORT, linked, layout.store_rules
            )

    def _host(self, host: str) -> str:
        """The endpoint host the nodes are told (see the module docstring)."""
        if not is_ip(host):
            return host
        if is_second_address(host):
            return str(ipaddress.ip_address(host))
        return self.network.address(0)

    @property
    def endpoint(self) -> str:
        """``host:port`` of the store, as node 0 is told (and every node without a link)."""
        return f"{self.host}:{SERVE_PORT}"

    def endpoint_of(self, node: int) -> str:
        """``host:port`` node ``node`` is told: its link's port when it has one."""
        port = self.paths.ports.get(node) if self.paths is not None else None
        return self.endpoint if port is None else f"{self.host}:{port}"

    # --- lifecycle --------------------------------------------------------------------

    def build(self, seed: int) -> None:
        """Build the network (after removing what dead harnesses left), then the paths
        through the harness the faults need; ``seed`` draws the links' toxicity rolls and
        jitter (the kernel draws its loss rolls: counted, not replayable)."""
        sweep()
        self.network.build()
        if self.paths is not None:
            self.paths.build(seed)

    def stop_nodes(self, grace: float) -> None:
        self._leftovers = self.cluster.close(grace=grace)

    def teardown(self) -> list[str]:
        self.rules.snapshot()
        problems = self.paths.teardown() if self.paths is not None else []
        problems += self.network.teardown()
        reader = self.cluster._reader
        threads = [reader] if isinstance(reader, threading.Thread) else []
        threads += self.paths.threads if self.paths is not None else []
        return leaks(self._leftovers, [], problems, threads)

    # --- nodes ------------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        node = launch.node
        shim = None if self.endpoint_name is None else self.endpoint_name.shim(node)
        if launch.job is not None:
            env = {**_GLOO_ON_ETH0, **launch.job.env}
            # the agent advertises its own address, as a host name resolving to it would
            # (here every namespace shares the machine's name, which resolves to loopback)
            own = launch.job.local_addr or self.network.address(node)
            launch = replace(launch, job=replace(launch.job, env=env, local_addr=own))
        spec = NodeSpec(launch, self.endpoint_of(node), dns=shim)
        args = (self.network.path(node), spec, self.cluster.gate)
        self.cluster.spawn(node, f"rdzv-node-{node}", node_entry, args)

    # --- the network ------------------------------------------------------------------

    def add_packet_rule(self, rule: PacketRule) -> NftRule:
        store = self.paths.store_ports() if self.paths is not None else (SERVE_PORT,)

        def real(ports: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(p for port in ports for p in (store if port == STORE_PORT else (port,)))

        found = replace(rule, ports=real(rule.ports), except_ports=real(rule.except_ports))
        return self.rules.add(found)

    def limit_bandwidth(self, nodes: Sequence[int], rate_kbit: int, direction: str) -> RateLimit:
        return self.rules.limit(nodes, rate_kbit, direction)

    def names_down(self) -> NameDown:
        return names_down(self.endpoint_name, self.layout.host)

    def add_toxic(self, nodes: Sequence[int], toxic: ToxicSpec) -> ProxiedToxic:
        return self._links(TOXICS).add_toxic(nodes, toxic)

    def link_down(self, nodes: Sequence[int]) -> ProxiedLink:
        return self._links(LINKS).link_down(nodes)

    def _links(self, capability: str) -> ProxyLinks:
        if self.paths is None or self.paths.links is None:
            raise cannot(self.name, capability, "the layout asked for no links")
        return self.paths.links

    def squatter(self) -> Any:
        raise cannot(self.name, SQUATTER, _NO_SQUATTER)

    def add_store_rule(self, rule: StoreRule) -> None:
        if self.paths is None or self.paths.store_faults is None:
            raise HarnessError("add_store_rule: the layout asked for no store rules")
        self.paths.store_faults.add_rule(rule)

    def link_log(self) -> list[dict[str, Any]] | None:
        if self.paths is None or self.paths.links is None:
            return None
        return self.paths.links.log()
