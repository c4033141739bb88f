"""The Ray world's network: a proxy agent on every host with nodes, each node's link on it.

Every host (Ray node) that runs nodes of the run gets a :class:`~harness.world.ray.actors.
ProxyAgent` actor pinned to it: the embedded Toxiproxy-API server, listening on the host's
address, driven from here with :class:`~harness.proxy.client.ToxiproxyClient` as the local
world drives its one server. Node ``i > 0`` reaches the store through its own link
``<run>-node<i>`` on its host's agent: the link listens on that host's loopback and its
upstream is node 0's store on node 0's host, so the link crosses machines when the two
nodes are on different hosts, and toxics and ``link_down`` act on it as they do locally.
Past :data:`~harness.world.proxied.LINKS_PER_PROXY` links on a host, the agent starts proxy
processes beside it (:meth:`~harness.world.ray.actors.ProxyAgent.more`) and the links are
shared out among them; the agent stops them with its server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.proxy.client import ToxiproxyClient
from harness.world.base import ToxicSpec
from harness.world.proxied.links import (
    LINKS_PER_PROXY,
    Downs,
    ProxiedLink,
    ProxiedToxic,
    make_links,
    put_toxic,
    shares,
)

__all__ = ["Agent", "RayNetwork"]

#: Why effects are not counted when an agent's event log cannot be read.
NO_LOG = "not counted: the proxy agent's event log could not be read"
#: Seconds an agent gets to stop its server before its actor is killed.
STOP_WAIT = 10.0


@dataclass
class Agent:
    """One host's proxy agent: its actor and a client of its API."""

    host_id: str
    actor: Any
    client: ToxiproxyClient


@dataclass
class RayNetwork:
    """Links of one run over the proxy agents (``agents``: Ray node id -> agent)."""

    tag: str
    agents: dict[str, Agent]
    links_per_proxy: int = LINKS_PER_PROXY
    links: dict[int, tuple[ToxiproxyClient, str]] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    _downs: Downs = field(default_factory=Downs)
    _touched: set[int] = field(default_factory=set)
    _log: list[dict[str, Any]] | None = None
    _log_read: bool = False
    _torn_down: bool = False

    def connect(self, hosts: dict[int, str], store: tuple[str, int]) -> None:
        """Create the link of every node in ``hosts`` (node -> Ray node id) on its host's
        agent (and the agent's proxy processes, past one proxy's share), upstream to
        ``store`` (address, port)."""
        import ray

        address, port = store
        upstream = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        by_host: dict[str, list[int]] = {}
        for node, host_id in hosts.items():
            by_host.setdefault(host_id, []).append(node)
        for host_id, nodes in by_host.items():
            agent = self.agents[host_id]
            parts = shares(nodes, self.links_per_proxy)
            apis = (
                ray.get(agent.actor.more.remote(len(parts) - 1), timeout=120)
                if len(parts) > 1
                else []
            )
            clients = [agent.client, *(ToxiproxyClient(*api) for api in apis)]
            for part, client in zip(parts, clients, strict=True):
                names, ports = make_links(
                    client, self.tag, "127.0.0.1:0", dict.fromkeys(part, upstream)
                )
                self.links.update({node: (client, name) for node, name in names.items()})
                self.ports.update(ports)

    def endpoint(self, node: int) -> str | None:
        """The ``host:port`` node ``node`` reaches the store at (None: it has no link)."""
        port = self.ports.get(node)
        return None if port is None else f"127.0.0.1:{port}"

    def _by_agent(self, nodes: Iterable[int]) -> list[tuple[ToxiproxyClient, list[str]]]:
        grouped: dict[int, tuple[ToxiproxyClient, list[str]]] = {}
        for node in nodes:
            client, name = self.links[node]
            grouped.setdefault(id(client), (client, []))[1].append(name)
        return list(grouped.values())

    def add_toxic(self, nodes: Sequence[int], toxic: ToxicSpec) -> ProxiedToxic:
        """Put ``toxic`` on the links of ``nodes`` (one request per host)."""
        for client, names in self._by_agent(nodes):
            put_toxic(client, names, toxic)
        self._touched.update(nodes)
        return ProxiedToxic(toxic, lambda: self._remove_toxic(nodes, toxic.name), self.log, NO_LOG)

    def _remove_toxic(self, nodes: Sequence[int], name: str) -> None:
        for client, names in self._by_agent(nodes):
            client.bulk.remove_toxic(names, name)

    def hold(self, node: int, name: str, latency_ms: int) -> None:
        """Hold both directions of ``node``'s link: a ``latency`` toxic each (a pause)."""
        client, link = self.links[node]
        for stream in ("upstream", "downstream"):
            client.add_toxic(
                link,
                "latency",
                stream=stream,
                name=f"{name}-{stream}",
                attributes={"latency": latency_ms},
            )

    def unhold(self, node: int, name: str) -> None:
        """Remove what :meth:`hold` put on the link (what it held goes on, in order)."""
        client, link = self.links[node]
        for stream in ("upstream", "downstream"):
            with contextlib.suppress(Exception):  # already gone with the link
                client.remove_toxic(link, f"{name}-{stream}")

    def link_down(self, nodes: Sequence[int]) -> ProxiedLink:
        """Take the links of ``nodes`` down (open connections cut, new ones refused)."""
        downs = self._downs.take(nodes)
        for client, names in self._by_agent(downs):
            client.bulk.set_enabled(names, False)
        self._touched.update(nodes)
        bring_up = self._downs.bring_up(nodes, self.set_up)
        return ProxiedLink(downs, bring_up, self.log, lambda node: self.links[node][1], NO_LOG)

    def set_up(self, nodes: Iterable[int]) -> None:
        for client, names in self._by_agent(nodes):
            client.bulk.set_enabled(names, True)

    def log(self) -> list[dict[str, Any]] | None:
        """The agents' events of every link a toxic or link_down acted on (each agent's in
        its order; read once after teardown, kept)."""
        if self._log_read:
            return self._log
        log: list[dict[str, Any]] | None = []
        try:
            for client, names in self._by_agent(sorted(self._touched)):
                events = [e for name in names for e in client.events(proxy=name)]
                assert log is not None
                log.extend(sorted(events, key=lambda e: int(e["seq"])))
        except Exception:
            log = None
        if self._torn_down:
            self._log, self._log_read = log, True
        return log

    def read_log(self) -> None:
        """Read the event log now (before the agents stop) and keep it."""
        self._torn_down = True
        self.log()

    def teardown(self) -> list[str]:
        """Keep the event log, stop every agent's server, end its actor.

        Returns:
            Problems met (an agent that could not be stopped), one line each.
        """
        import ray

        self.read_log()
        problems = []
        stops = {agent.host_id: agent.actor.stop.remote() for agent in self.agents.values()}
        for host_id, ref in stops.items():
            try:
                ray.get(ref, timeout=STOP_WAIT)
            except Exception as exc:
                problems.append(f"could not stop the proxy agent on host {host_id}: {exc}")
        for agent in self.agents.values():
            ray.kill(agent.actor, no_restart=True)
        return problems
