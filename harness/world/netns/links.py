"""Proxy links in the netns world: each node's link served in the store host's namespace.

When a scenario's faults need links (toxics, link downs), nodes ``1..N-1`` reach the store
through a link of their own, as in the local world (:func:`~harness.world.proxied.make_links`,
:class:`~harness.world.proxied.ProxyLinks`), on an embedded proxy started for the run. Its
API listens on this machine's loopback, where the harness drives it; then its event-loop
thread enters node 0's namespace (setns(2) moves only that thread), so every socket the
proxy opens from then on is there: each link listens on the address a node would dial
(node 0's address, or its second one), on a port of its own, and dials the store on
node 0's serving port. A node's packets to its link cross the switch from the node's port
to node 0 as packets to the store do, so the kernel's rules judge them the same way when
the store port is read as every port the store is served on (:meth:`NodeLinks.store_ports`):
a dropped SYN is the node's own SYN, never the proxy's. A toxic acts on the store host's
side of the link.

The proxy's thread leaves node 0's namespace when the proxy stops, which
:meth:`NodeLinks.teardown` does before the namespaces are deleted. A real Toxiproxy
(``--toxiproxy``) cannot reach the namespaces: this world always uses its own proxy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.world.netns.enter import enter
from harness.world.proxied import ProxyLinks, make_links

__all__ = ["NodeLinks"]


@dataclass
class NodeLinks:
    """The links of nodes ``1..nodes-1``: :meth:`build`, then always :meth:`teardown`.

    Attributes:
        tag: the run's tag (names the links).
        nodes: how many nodes the run has.
        namespace: node 0's namespace file (``/run/netns/...``).
        listen: the address the links listen on, in node 0's namespace.
        store: ``host:port`` of the store, as seen from node 0's namespace.
    """

    tag: str
    nodes: int
    namespace: str
    listen: str
    store: str
    ports: dict[int, int] = field(default_factory=dict)
    server: ToxiproxyServer | None = None
    links: ProxyLinks | None = None

    def build(self, seed: int) -> None:
        """Start the proxy (its toxics drawing from ``seed``) and make the links.

        Raises:
            HarnessError: the proxy could not enter node 0's namespace or make a link
                (after what was started is stopped).
        """
        try:
            self._build(seed)
        except BaseException:
            self.teardown()
            raise

    def _build(self, seed: int) -> None:
        self.server = server = ToxiproxyServer(seed=seed).start()

        async def move() -> None:
            enter(self.namespace)

        try:
            server.call(move())
        except OSError as exc:
            raise HarnessError(
                f"netns world: the proxy could not enter node 0's namespace: {exc}"
            ) from exc
        client = ToxiproxyClient(server.host, server.port)
        upstream = dict.fromkeys(range(1, self.nodes), self.store)
        names, self.ports = make_links(client, self.tag, f"{self.listen}:0", upstream)
        self.links = ProxyLinks(
            client, names, "not counted: the proxy's event log could not be read"
        )

    def store_ports(self, serve: int) -> tuple[int, ...]:
        """Every port the store is reached at: ``serve`` and each link's."""
        return (serve, *sorted(self.ports.values()))

    def teardown(self) -> list[str]:
        """Read the links' event log for the faults' counts, then stop the proxy
        (idempotent).

        Returns:
            Problems met (a proxy that would not stop: its thread may hold node 0's
            namespace).
        """
        if self.links is not None:
            self.links.over = True
            self.links.log()
        server, self.server = self.server, None
        if server is None:
            return []
        try:
            server.stop()
        except Exception as exc:
            return [f"the netns world's proxy did not stop: {exc}"]
        return []
