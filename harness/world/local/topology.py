"""The local world's network: node 0's port, each node's proxy link, DNS, store faults.

* Node 0 serves the store on a socket the harness binds (port 0, read back) but does not
  listen on, and hands over: the port is never "found free, then closed", and until node 0
  listens, connections are refused as in the field. A squatter fault holds the port
  instead, and node 0 must bind it itself — and fails, as in the field.
* Every other node reaches node 0 through its own proxy link (``<run>-node<i>`` on the
  Toxiproxy API, embedded or real), so a toxic or a link-down can target any set of nodes.
  Past :data:`~harness.world.proxied.links.LINKS_PER_PROXY` links, the embedded proxy's links
  are shared out: the first share on the world's proxy, each further one on a proxy
  process of its own (:mod:`harness.proxy.process`, seeded alike), whose API
  :attr:`Topology.routes` names. A real Toxiproxy holds every link itself.
* With store rules (:attr:`~harness.world.base.Layout.store_rules`) a
  :class:`~harness.world.proxied.store_faults.StoreFaultProxy` sits between the links and the store.
* When the endpoint host is a name, each node resolves it through a shim (``DnsShim``) that
  the harness can switch off to simulate a name that does not resolve yet.
"""

from __future__ import annotations

import contextlib
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from harness.proxy.client import ToxiproxyClient
from harness.proxy.process import START_WAIT, ProxyProcess, stop_all
from harness.world.base import Layout, is_ip
from harness.world.process.dns import DnsShim, EndpointName
from harness.world.proxied.links import LINKS_PER_PROXY, make_links, shares
from harness.world.proxied.squatters import Squatter
from harness.world.proxied.store_faults import StoreFaultProxy

__all__ = ["Topology"]


@dataclass
class Topology:
    """Build with :meth:`build`; always :meth:`teardown` (idempotent).

    ``proxy_seed``: the embedded proxy's seed, when ``client`` drives the embedded proxy
    (None: a real Toxiproxy, which holds every link); proxy processes get it too.
    """

    layout: Layout
    client: ToxiproxyClient
    ctx: Any
    proxy_seed: int | None = None
    links_per_proxy: int = LINKS_PER_PROXY
    routes: dict[int, ToxiproxyClient] = field(default_factory=dict)
    processes: list[ProxyProcess] = field(default_factory=list)
    store_port: int = 0
    listen_socket: socket.socket | None = None
    squatter: Squatter | None = None
    store_faults: StoreFaultProxy | None = None
    proxies: dict[int, str] = field(default_factory=dict)
    proxy_ports: dict[int, int] = field(default_factory=dict)
    endpoint_name: EndpointName | None = None
    _torn_down: bool = False

    def build(self) -> Topology:
        """Bind, start proxies, create links. Raises whatever setup failed (after cleanup)."""
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def _build(self) -> None:
        layout = self.layout
        if layout.squatter is not None:
            self.squatter = Squatter(layout.squatter)
            self.store_port = self.squatter.port
        else:
            family = socket.AF_INET6 if ":" in self._bind_address else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            # Bound, not listening: until node 0 adopts it and listens, connections to the
            # port are refused, exactly as when no server has started yet.
            sock.bind((self._bind_address, 0))
            self.listen_socket = sock
            self.store_port = sock.getsockname()[1]
        upstream = {i: self.store_port for i in range(layout.nodes)}
        if layout.store_rules:
            self.store_faults = StoreFaultProxy(("127.0.0.1", self.store_port)).start()
            upstream = {i: self.store_faults.listen(i) for i in range(1, layout.nodes)}
        if layout.via_links and layout.nodes > 1:
            self._make_links({n: f"127.0.0.1:{upstream[n]}" for n in range(1, layout.nodes)})
        elif self.store_faults is not None:
            self.proxy_ports = {i: upstream[i] for i in range(1, layout.nodes)}
        if not is_ip(layout.host):
            address = self._bind_address
            self.endpoint_name = EndpointName(self.ctx, layout.host, address, layout.nodes)

    def _make_links(self, dials: dict[int, str]) -> None:
        """The links, shared out: the world's own proxy makes its share while the proxy
        processes start, then theirs are made at once, one thread per process."""
        parts = [list(dials)] if self.proxy_seed is None else shares(dials, self.links_per_proxy)
        seed = self.proxy_seed or 0
        self.processes = [ProxyProcess("127.0.0.1", seed).launch() for _ in parts[1:]]
        self._add_links(self.client, parts[0], dials)
        deadline = time.monotonic() + START_WAIT
        clients = [process.ready(deadline) for process in self.processes]
        with ThreadPoolExecutor(max(1, len(clients))) as pool:
            made = [
                pool.submit(self._add_links, client, part, dials)
                for part, client in zip(parts[1:], clients, strict=True)
            ]
        for future in made:
            future.result()

    def _add_links(self, client: ToxiproxyClient, part: list[int], dials: dict[int, str]) -> None:
        names, ports = make_links(
            client, self.layout.tag, "127.0.0.1:0", {n: dials[n] for n in part}
        )
        self.proxies.update(names)
        self.proxy_ports.update(ports)
        if client is not self.client:
            self.routes.update(dict.fromkeys(part, client))

    @property
    def _bind_address(self) -> str:
        host = self.layout.host
        return host if is_ip(host) else "127.0.0.1"

    def endpoint(self, node: int) -> str:
        """The ``host:port`` node ``node`` is told to rendezvous at."""
        host = self.layout.host
        port = self.proxy_ports.get(node, self.store_port) if node else self.store_port
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def dns_shim(self, node: int) -> DnsShim | None:
        """The resolver shim node ``node`` installs, when the endpoint host is a name."""
        return None if self.endpoint_name is None else self.endpoint_name.shim(node)

    def take_listen_socket(self) -> socket.socket | None:
        """The socket node 0 serves on, handed over once (None afterwards, and when node 0
        must bind the port itself: after a restart it binds, like a restarted server)."""
        sock, self.listen_socket = self.listen_socket, None
        return sock

    def ports(self) -> list[int]:
        """Every port this topology listened on (for the leak check)."""
        return [self.store_port, *self.proxy_ports.values()]

    def teardown(self) -> list[str]:
        """Remove links, stop interposers, release squatters, close sockets.

        Returns:
            Problems met on the way (a proxy that could not be deleted, ...).
        """
        if self._torn_down:
            return []
        self._torn_down = True
        problems = []
        for process in self.processes:  # they end while this proxy deletes its own share
            process.terminate()
        mine = [name for node, name in self.proxies.items() if node not in self.routes]
        try:
            problems += self.client.delete_proxies(mine)
        except Exception as exc:
            problems.append(f"could not delete the proxies of {self.layout.tag}: {exc}")
        stop_all(self.processes)  # their links go with them
        if self.store_faults is not None:
            self.store_faults.stop()
        if self.squatter is not None:
            self.squatter.release()
        if self.listen_socket is not None:
            with contextlib.suppress(OSError):
                self.listen_socket.close()
        return problems
