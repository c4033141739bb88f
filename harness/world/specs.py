"""What the runner hands a world: plain values, made by fault kinds and the runner.

* :class:`Layout`     what a world builds for one run
* :class:`Launch`     what one node runs
* :class:`JobSpec`    what a job node runs (a torchrun agent with its workers)
* :class:`ToxicSpec`  one toxic, in Toxiproxy's terms
* :class:`PacketRule` packets between nodes that a kernel rule drops or rejects
* :class:`StoreRule`  one store-level fault; the world counts its firings in ``fired``
  (matching requests against it is the interposer's job,
  :func:`harness.world.proxied.store_faults.matches`)

Re-exported by :mod:`harness.world.base`. Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "STORE_PORT",
    "JobSpec",
    "Launch",
    "Layout",
    "PacketRule",
    "StoreAction",
    "StoreRule",
    "ToxicSpec",
    "Verdict",
]


@dataclass(frozen=True)
class Layout:
    """What a world builds for one run, before any node starts.

    Attributes:
        tag: unique to the run; names its resources (links, namespaces, actors).
        nodes: how many nodes (``0..nodes-1``).
        host: the endpoint host the nodes are told; when it is a name (not an IP address)
            the world makes it resolve, and :meth:`World.names_down` can stop that.
        via_links: every node but node 0 reaches the store over a link of its own, which
            toxics and ``link_down`` act on.
        backends: the rendezvous backends the nodes run (a world may load them ahead).
        squatter: a squatter of this mode holds the store's port from the start (node 0
            must bind the port itself and finds it taken); ``None``: no squatter.
        store_rules: store traffic passes through something that applies store rules.
        needs: every capability the scenario's faults use (a world may build a part only
            when a fault needs it: the netns world starts its proxy links only for toxics
            or link downs).
    """

    tag: str
    nodes: int
    host: str
    via_links: bool = True
    backends: frozenset[str] = frozenset({"static"})
    squatter: str | None = None
    store_rules: bool = False
    needs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class JobSpec:
    """How a job node runs (the scenario's ``[job]`` table, resolved).

    Attributes:
        nproc_per_node: workers per node.
        script: the worker script's path (None: the default all-reduce).
        args: the script's arguments.
        max_restarts: torchrun's ``--max-restarts``.
        monitor_interval: torchrun's ``--monitor-interval``, seconds.
        exit_barrier_timeout: how long an agent whose workers finished waits for the
            others (torch's default is 300 s).
        env: environment variables for the workers (on top of the node's).
        process_group_timeout: the workers' ``init_process_group`` timeout, seconds.
        endpoint: False: torchrun started without ``--rdzv-endpoint``, each node falling
            back to its own host (:func:`harness.world.process.jobs.agent.launch_config`).
        local_addr: the address an agent advertises (torchrun's ``--local-addr``; None:
            torch's default, the host's name).
    """

    nproc_per_node: int = 1
    script: str | None = None
    args: tuple[str, ...] = ()
    max_restarts: int = 0
    monitor_interval: float = 0.2
    exit_barrier_timeout: float = 30.0
    env: dict[str, str] = field(default_factory=dict)
    process_group_timeout: float = 30.0
    endpoint: bool = True
    local_addr: str | None = None


@dataclass(frozen=True)
class Launch:
    """What one node runs: its rendezvous and how it starts (never where, or at what address)."""

    node: int
    backend: str
    run_id: str
    rank: int
    world_size: int
    join_timeout: float
    config: Mapping[str, Any] = field(default_factory=dict)
    #: The node freezes itself once its handler is built, before the release (resumed by
    #: :meth:`World.resume`).
    start_paused: bool = False
    #: Which start of the node this is (1: its first; a restart's replacement: 2, ...).
    incarnation: int = 1
    #: The node is a torchrun job (agent and workers) running this (None: one rendezvous).
    job: JobSpec | None = None


@dataclass(frozen=True)
class ToxicSpec:
    """One toxic, in Toxiproxy's terms (see docs/proxy.md)."""

    name: str
    type: str
    stream: str = "downstream"
    toxicity: float = 1.0
    attributes: Mapping[str, int] = field(default_factory=dict)


#: In a :class:`PacketRule`'s ports: the port the store listens on (the world knows it).
STORE_PORT = 0

#: What a packet rule does to the packets it matches: ``drop`` (silently), ``reject-reset``
#: (a TCP reset: the connect is refused), ``reject-unreachable`` (ICMP host unreachable).
Verdict = Literal["drop", "reject-reset", "reject-unreachable"]


@dataclass(frozen=True)
class PacketRule:
    """Packets from the ``sources`` nodes to the ``destinations`` nodes that match get
    ``verdict``.

    Attributes:
        sources: the nodes whose packets it matches (by their address).
        destinations: the nodes the packets go to.
        verdict: what happens to a matching packet.
        ports: only TCP packets to these ports of the destinations (empty: every packet);
            :data:`STORE_PORT` stands for the port the store listens on.
        except_ports: only TCP packets to ports *not* listed (empty: no such condition).
        syn_only: only connection attempts (a SYN without ACK).
        percent: only this share of matching packets, drawn at random per packet (100:
            every one).
        label: what the counted packets are, for the count (``"SYNs dropped"``).
    """

    sources: tuple[int, ...]
    destinations: tuple[int, ...]
    verdict: Verdict = "drop"
    ports: tuple[int, ...] = ()
    except_ports: tuple[int, ...] = ()
    syn_only: bool = False
    percent: float = 100.0
    label: str = "packets dropped"


#: What a store rule does to a request it matches: hold it ``delay`` seconds (and, to keep
#: order, all that follow on that connection), swallow it and all that follow, or close the
#: client's connection instead of forwarding it.
StoreAction = Literal["delay", "drop", "fail"]


@dataclass
class StoreRule:
    """One store-level fault: which operation (``"*"``: any), on which keys (a glob), from
    which nodes (``None``: every node), what to do, how many times. ``fired`` counts what
    it did (the world adds to it)."""

    op: str
    keys: str
    action: StoreAction
    delay: float = 0.0
    count: int = 1
    nodes: frozenset[int] | None = None
    fired: int = 0

    @property
    def acted(self) -> dict[str, int]:
        """What the rule did so far, for the report: ``{"WAIT requests held": 1}`` (empty
        when it never fired)."""
        what = "requests" if self.op == "*" else f"{self.op} requests"
        effect = {
            "delay": f"{what} held",
            "drop": f"{what} dropped",
            "fail": f"{what} failed (connection closed)",
        }[self.action]
        return {effect: self.fired} if self.fired else {}
