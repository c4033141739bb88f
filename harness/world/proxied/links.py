"""Faults on proxied links, shared by the worlds whose nodes reach the store through the
embedded proxy (the local world's one server, the Ray world's agent on every host).

* :class:`ProxiedToxic` — a toxic put on some nodes' links (``Toxic`` of world/base.py);
* :class:`ProxiedLink` — some nodes' links taken down (``Link`` of world/base.py);
* :class:`Downs` — how many times each node's link went down, so that a
  :class:`ProxiedLink` counts the cuts of its own time down only;
* :func:`make_links` and :class:`ProxyLinks` — the links of nodes on Toxiproxy APIs (the
  local world's on loopback, the netns world's in the store host's namespace): made in one
  request per proxy, then toxics and downs on them, and the event log of the links they
  touched;
* :data:`LINKS_PER_PROXY` and :func:`shares` — how many links one proxy process holds, and
  the nodes' links cut into such shares (the embedded proxy's extra processes take the
  shares past the first: see :mod:`harness.proxy.process`).

A world supplies what differs: how to take the toxic off or bring the links up, how to
read the proxy's event log (None when it cannot be read: the effects are then
:class:`~harness.world.base.Uncounted`, with the world's reason), and each node's link name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.errors import HarnessError
from harness.proxy.client import ToxiproxyClient
from harness.proxy.events import link_cuts, toxic_effects
from harness.world.base import ToxicEffects, ToxicSpec, Uncounted

__all__ = [
    "HOLD_MS",
    "LINKS_PER_PROXY",
    "LINKS_PER_REQUEST",
    "PAUSE_TOXIC",
    "Downs",
    "LogRows",
    "ProxiedLink",
    "ProxiedToxic",
    "ProxyLinks",
    "make_links",
    "put_toxic",
    "shares",
]

#: Links one proxy process holds at most. Each link holds three descriptors there (its
#: listener, the node's connection, the dial to the store): 10,240 links in one process
#: needed 30,720, past the 20,000 one process may open here, and 5,392 nodes never got
#: their handshake answered (issue 29). 2,048 links hold 6,144; the first share stays on
#: the world's own proxy, so runs of up to 2,049 nodes start no proxy process.
LINKS_PER_PROXY = 2048


def shares(nodes: Iterable[int], per: int = LINKS_PER_PROXY) -> list[list[int]]:
    """``nodes`` in order, cut into consecutive shares of at most ``per`` (a proxy each)."""
    ordered = sorted(nodes)
    return [ordered[i : i + per] for i in range(0, len(ordered), per)]


#: The proxy's event log as a world reads it: None when it cannot be read.
LogRows = list[dict[str, Any]] | None

#: A node paused on its link (a packed node, whose process cannot be stopped for it alone):
#: both directions hold their data in a ``latency`` toxic of a year, named ``PAUSE_TOXIC``
#: plus the stream; removing it hands on what it held, in order.
HOLD_MS: Final = 365 * 24 * 3600 * 1000
#: Name of the pause toxics (one per direction): ``harness-pause-upstream``, ...
PAUSE_TOXIC: Final = "harness-pause"


@dataclass
class ProxiedToxic:
    """A toxic on some nodes' links; ``no_log`` says why effects are not counted when
    ``read_log`` returns None."""

    spec: ToxicSpec
    take_off: Callable[[], None]
    read_log: Callable[[], LogRows]
    no_log: str

    def remove(self) -> None:
        self.take_off()

    def effects(self) -> ToxicEffects | Uncounted:
        log = self.read_log()
        if log is None:
            return Uncounted(self.no_log)
        return toxic_effects(log, self.spec.name, self.spec.type)


@dataclass
class ProxiedLink:
    """Links taken down: ``downs`` maps each node to how many times its link had gone down
    before (from :meth:`Downs.take`); ``link_of`` names a node's link in the event log."""

    downs: dict[int, int]
    bring_up: Callable[[], None]
    read_log: Callable[[], LogRows]
    link_of: Callable[[int], str]
    no_log: str

    def up(self) -> None:
        self.bring_up()

    def cuts(self) -> int | Uncounted:
        log = self.read_log()
        if log is None:
            return Uncounted(self.no_log)
        total = 0
        for node, nth in self.downs.items():
            cuts = link_cuts(log, self.link_of(node))
            total += cuts[nth] if nth < len(cuts) else 0
        return total


@dataclass
class Downs:
    """Each node's link in a run: how many times it was disabled, and how many ``link_down``
    faults hold it down now. Downs that overlap on a link hold it down until the last of
    them ends: the first to end does not bring it up under the others (a count per node,
    as :meth:`~harness.run.context.Context.hold` keeps for pauses)."""

    _count: dict[int, int] = field(default_factory=dict)
    _held: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, nodes: Iterable[int]) -> dict[int, int]:
        """Hold each of ``nodes`` down once more. Returns, for each node this take disables
        (no other down held it), how many times its link had been disabled before: which
        of the link's disablings is this one (a node already down is left out: the
        connections it had were cut by the down that holds it)."""
        with self._lock:
            disabled: dict[int, int] = {}
            for node in nodes:
                if self._held.get(node, 0) == 0:
                    disabled[node] = self._count.get(node, 0)
                    self._count[node] = disabled[node] + 1
                self._held[node] = self._held.get(node, 0) + 1
            return disabled

    def release(self, nodes: Iterable[int]) -> list[int]:
        """Let go of one hold on each of ``nodes``; the nodes no down holds any more (the
        links to bring up), in order."""
        with self._lock:
            up = []
            for node in nodes:
                self._held[node] = max(self._held.get(node, 0) - 1, 0)
                if self._held[node] == 0:
                    up.append(node)
            return sorted(up)

    def bring_up(
        self, nodes: Sequence[int], enable: Callable[[list[int]], None]
    ) -> Callable[[], None]:
        """The heal of a down of ``nodes``: once (a second call does nothing), let go of its
        holds and ``enable`` the links no other down holds."""
        done = threading.Event()

        def up() -> None:
            if done.is_set():
                return
            done.set()
            free = self.release(nodes)
            if free:
                enable(free)

        return up


#: Links made in one ``POST /populate``: a request stays short on a loaded host (the
#: client's timeout is 10 s; 10,240 links in one request did not answer in time on Ray).
LINKS_PER_REQUEST = 256


def make_links(
    client: ToxiproxyClient, tag: str, listen: str, upstream: Mapping[int, str]
) -> tuple[dict[int, str], dict[int, int]]:
    """One proxy link per node of ``upstream`` (node -> the ``host:port`` its link dials),
    each listening on ``listen`` (``host:0``: a port of its own), made with
    ``POST /populate``, :data:`LINKS_PER_REQUEST` links per request.

    Returns:
        Each node's link name (``<tag>-node<i>``) and the port its link listens on.
    """
    wanted = {f"{tag}-node{node}": node for node in upstream}
    names: dict[int, str] = {}
    ports: dict[int, int] = {}
    batch = list(wanted.items())
    for start in range(0, len(batch), LINKS_PER_REQUEST):
        part = batch[start : start + LINKS_PER_REQUEST]
        created = client.populate(
            [{"name": name, "listen": listen, "upstream": upstream[n]} for name, n in part]
        )
        for info in created:
            node = wanted[info.name]
            names[node] = info.name
            ports[node] = info.listen_address[1]
    return names, ports


def put_toxic(client: ToxiproxyClient, links: Sequence[str], toxic: ToxicSpec) -> None:
    """Put ``toxic`` on every link of ``links`` on ``client``'s proxy (one request)."""
    client.bulk.add_toxic(
        links,
        toxic.type,
        stream=toxic.stream,
        name=toxic.name,
        toxicity=toxic.toxicity,
        attributes=dict(toxic.attributes),
    )


@dataclass
class ProxyLinks:
    """Toxics and link downs on the nodes' links: ``names`` maps a node to its link (filled
    when the links are made), on ``client``'s proxy unless ``routes`` names another for the
    node (a proxy process of its own: see :data:`LINKS_PER_PROXY`); ``no_log`` says why
    effects are not counted when the proxy keeps no event log (a real Toxiproxy)."""

    client: ToxiproxyClient
    names: Mapping[int, str]
    no_log: str
    routes: Mapping[int, ToxiproxyClient] = field(default_factory=dict)
    _downs: Downs = field(default_factory=Downs)
    _touched: set[int] = field(default_factory=set)  # nodes a toxic or link_down acted on
    #: The run is over: the next read of the log is kept, and every later one returns it
    #: (the counts of the faults read it after teardown, also once the proxy is gone).
    over: bool = False
    _log: LogRows = None
    _kept: bool = False

    def client_of(self, node: int) -> ToxiproxyClient:
        """The API of the proxy that holds ``node``'s link."""
        return self.routes.get(node, self.client)

    def by_proxy(self, nodes: Iterable[int]) -> list[tuple[ToxiproxyClient, list[str]]]:
        """The links of ``nodes``, grouped by the proxy that holds them (in node order)."""
        grouped: dict[int, tuple[ToxiproxyClient, list[str]]] = {}
        for node in sorted(nodes):
            client = self.client_of(node)
            grouped.setdefault(id(client), (client, []))[1].append(self.names[node])
        return list(grouped.values())

    def add_toxic(self, nodes: Sequence[int], toxic: ToxicSpec) -> ProxiedToxic:
        groups = self.by_proxy(nodes)
        for client, links in groups:
            put_toxic(client, links, toxic)
        self._touched.update(nodes)

        def take_off() -> None:
            for client, links in groups:
                client.bulk.remove_toxic(links, toxic.name)

        return ProxiedToxic(toxic, take_off, self.log, self.no_log)

    def link_down(self, nodes: Sequence[int]) -> ProxiedLink:
        downs = self._downs.take(nodes)
        for client, links in self.by_proxy(downs):
            client.bulk.set_enabled(links, False)
        self._touched.update(nodes)

        def enable(free: list[int]) -> None:
            for client, links in self.by_proxy(free):
                client.bulk.set_enabled(links, True)

        bring_up = self._downs.bring_up(nodes, enable)
        return ProxiedLink(downs, bring_up, self.log, self.names.__getitem__, self.no_log)

    def log(self) -> LogRows:
        """The proxy's events of every link a toxic or link_down acted on, in order (None
        when the proxy keeps no log); read once when :attr:`over`."""
        if self._kept:
            return self._log
        log: LogRows = []
        try:  # each proxy's events in its order (a link's events are all on one proxy)
            for client, names in self.by_proxy(self._touched):
                events = [event for name in names for event in client.events(proxy=name)]
                assert log is not None
                log.extend(sorted(events, key=lambda e: int(e["seq"])))
        except HarnessError:
            log = None
        if self.over:
            self._log, self._kept = log, True
        return log
