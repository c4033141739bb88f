"""The netns world's paths to the store through the harness: proxy links, store rules.

When a scenario's faults need links (toxics, link downs), nodes ``1..N-1`` reach the store
through a link of their own, as in the local world (:func:`~harness.world.proxied.links.make_links`,
:class:`~harness.world.proxied.links.ProxyLinks`), on an embedded proxy started for the run. Its
API listens on this machine's loopback, where the harness drives it; then its event-loop
thread enters node 0's namespace (setns(2) moves only that thread), so every socket the
proxy opens from then on is there: each link listens on the address a node would dial
(node 0's address, or its second one), on a port of its own, and dials the store on
node 0's serving port. When faults need store rules, a
:class:`~harness.world.proxied.store_faults.StoreFaultProxy` does the same, its thread in node 0's
namespace, between the links (or the nodes, without links) and the store.

A node's packets to its link cross the switch from the node's port to node 0 as packets to
the store do, so the kernel's rules judge them the same way when the store port is read
as every port the store is reached at (:meth:`StorePaths.store_ports`): a dropped SYN is
the node's own SYN, never the proxy's. A toxic acts on the store host's side of the link.

The threads leave node 0's namespace when they stop, which :meth:`StorePaths.teardown`
does before the namespaces are deleted. A real Toxiproxy (``--toxiproxy``) cannot reach the
namespaces: this world always uses its own proxy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.world.netns.enter import enter
from harness.world.proxied.links import ProxyLinks, make_links
from harness.world.proxied.store_faults import StoreFaultProxy

__all__ = ["StorePaths"]


@dataclass
class StorePaths:
    """The paths of nodes ``1..nodes-1`` to the store: :meth:`build`, then always
    :meth:`teardown`.

    Attributes:
        tag: the run's tag (names the links).
        nodes: how many nodes the run has.
        namespace: node 0's namespace file (``/run/netns/...``).
        listen: the address the nodes dial, in node 0's namespace.
        serve: the port node 0 serves the store on.
        linked: make proxy links (toxics, link downs).
        store_rules: put a store interposer on the path.
        ports: the port each node is told, once built.
    """

    tag: str
    nodes: int
    namespace: str
    listen: str
    serve: int
    linked: bool = False
    store_rules: bool = False
    ports: dict[int, int] = field(default_factory=dict)
    server: ToxiproxyServer | None = None
    links: ProxyLinks | None = None
    store_faults: StoreFaultProxy | None = None
    #: The threads that entered node 0's namespace (each must be gone after teardown).
    threads: list[threading.Thread] = field(default_factory=list)

    def build(self, seed: int) -> None:
        """Start what is asked for (the toxics drawing from ``seed``).

        Raises:
            HarnessError: a thread could not enter node 0's namespace, or a link could not
                be made (after what was started is stopped).
        """
        try:
            self._build(seed)
        except BaseException:
            self.teardown()
            raise

    def _enter(self) -> None:
        """Move the calling thread into node 0's namespace (and keep it in mind)."""
        try:
            enter(self.namespace)
        except OSError as exc:
            raise HarnessError(
                f"netns world: the harness could not enter node 0's namespace: {exc}"
            ) from exc
        self.threads.append(threading.current_thread())

    def _build(self, seed: int) -> None:
        others = range(1, self.nodes)
        dials = dict.fromkeys(others, f"{self.listen}:{self.serve}")
        if self.store_rules:
            self.store_faults = StoreFaultProxy((self.listen, self.serve)).start(self._enter)
            self.ports = {n: self.store_faults.listen(n, self.listen) for n in others}
            dials = {n: f"{self.listen}:{port}" for n, port in self.ports.items()}
        if not self.linked:
            return
        self.server = server = ToxiproxyServer(seed=seed).start()

        async def move() -> None:
            self._enter()

        server.call(move())
        client = ToxiproxyClient(server.host, server.port)
        names, self.ports = make_links(client, self.tag, f"{self.listen}:0", dials)
        self.links = ProxyLinks(client, names, "not counted: the proxy's event log was not read")

    def store_ports(self) -> tuple[int, ...]:
        """Every port the nodes reach the store at: node 0's, and each node's path's."""
        return (self.serve, *sorted(self.ports.values()))

    def teardown(self) -> list[str]:
        """Read the links' event log for the faults' counts, then stop the proxy and the
        interposer (idempotent).

        Returns:
            Problems met (a proxy that would not stop: its thread may hold node 0's
            namespace).
        """
        if self.links is not None:
            self.links.over = True
            self.links.log()
        problems = []
        server, self.server = self.server, None
        if server is not None:
            try:
                server.stop()
            except Exception as exc:
                problems.append(f"the netns world's proxy did not stop: {exc}")
        if self.store_faults is not None:
            self.store_faults.stop()
        return problems
