"""The World protocol: where the nodes of one run live and how faults reach them.

A world runs the N nodes of one scenario run and carries out what the runner and the fault
kinds ask of them. Everything done to nodes and to their network goes through these verbs,
in pairs like turmoil's:

========== ======================================================================
nodes      :meth:`~World.start` / :meth:`~World.kill`; :meth:`~World.release` (the
           start gate); :meth:`~World.pause` /
           :meth:`~World.resume` (:meth:`~World.paused`: still paused?)
links      :meth:`~World.add_toxic` -> :class:`Toxic` (``remove``);
           :meth:`~World.link_down` -> :class:`Link` (``up``)
names      :meth:`~World.names_down` -> :class:`Names` (``up``)
store      :meth:`~World.squatter` -> :class:`Squatter` (``release``);
           :meth:`~World.add_store_rule`
packets    :meth:`~World.add_packet_rule` -> :class:`Rule` (``lift``): drop, reject, lose
           packets between nodes (kernel rules); :meth:`~World.limit_bandwidth` ->
           :class:`Rule` (``lift``)
lifecycle  :meth:`~World.build`, :meth:`~World.stop_nodes`, :meth:`~World.teardown`
coming     the ``on_message`` callback handed to the :class:`WorldFactory`: typed messages
back       (:data:`Message`, :mod:`harness.world.messages`: ``Ready``, ``Started``,
           ``Event``, ``Outcome``, ``Exit``); after the run :meth:`~World.output` and the
           counts on the handles above (what each fault did)
========== ======================================================================

Nodes are ints ``0..N-1``; node 0 hosts the store. Nothing here says what a node is (a
process, a thread, an actor), where it runs, or what an address looks like: the world hands
nodes their endpoint itself. A world lists what it can do in ``capabilities``
(:data:`CAPABILITIES` names them); the runner compares them with what a scenario's faults
need before anything starts, and a verb a world cannot carry out raises
:class:`~harness.errors.UnsupportedError` -- never a silent no-op.

Imports: the standard library, :mod:`harness.errors`, :mod:`harness.world.messages` (what
comes back), and (for the types its handles return) :mod:`harness.proxy.events`; it passes
on the plain values of :mod:`harness.world.specs` (``Layout``, ``Launch``, ``ToxicSpec``,
``PacketRule``, ``StoreRule``) and :data:`TOXIC_ATTRIBUTES` (the attributes of each toxic
type) from :mod:`harness.proxy.toxics`. Nothing of how any world works; a world knows
nothing of scenario files, fault kinds or reports.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from harness.errors import UnsupportedError
from harness.proxy.events import ToxicEffects
from harness.proxy.toxics import TOXIC_ATTRIBUTES
from harness.world.messages import Message
from harness.world.specs import (
    STORE_PORT,
    JobSpec,
    Launch,
    Layout,
    PacketRule,
    StoreRule,
    ToxicSpec,
    Verdict,
)

__all__ = [
    "BANDWIDTH",
    "CAPABILITIES",
    "JOBS",
    "KILL",
    "LINKS",
    "NAMES",
    "PACKETS",
    "PAUSE",
    "RESTART",
    "SQUATTER",
    "SQUATTER_MODES",
    "STORE_PORT",
    "STORE_RULES",
    "TOXICS",
    "TOXIC_ATTRIBUTES",
    "Interruptible",
    "JobSpec",
    "Launch",
    "Layout",
    "Link",
    "Message",
    "Names",
    "OnMessage",
    "PacketRule",
    "Rule",
    "Squatter",
    "SquatterMode",
    "StoreRule",
    "Toxic",
    "ToxicEffects",
    "ToxicSpec",
    "Uncounted",
    "Verdict",
    "World",
    "WorldFactory",
    "cannot",
    "is_ip",
    "missing",
]

#: Capabilities: what a world can do to its nodes and their network.
KILL = "kill"
PAUSE = "pause"
RESTART = "restart"
TOXICS = "toxics"
LINKS = "links"
NAMES = "names"
SQUATTER = "squatter"
STORE_RULES = "store_rules"
PACKETS = "packets"
BANDWIDTH = "bandwidth"
JOBS = "jobs"
#: Every capability this module names, with what it means (for "cannot" messages).
CAPABILITIES: Mapping[str, str] = {
    KILL: "kill a node",
    PAUSE: "pause and resume a node",
    RESTART: "start a node again after it ended",
    TOXICS: "put toxics on a node's link",
    LINKS: "take a node's link down",
    NAMES: "make the endpoint's host name stop resolving",
    SQUATTER: "hold the store's port with a squatter",
    STORE_RULES: "apply store-level rules to a node's requests",
    PACKETS: "drop, reject or lose packets between nodes (kernel packet rules)",
    BANDWIDTH: "limit a node's bandwidth (kernel traffic control)",
    JOBS: "run torchrun jobs (an agent and its workers, each a process) and act on their parts",
}

#: How a squatter holds the store's port (see :mod:`harness.world.proxied.squatters`).
SquatterMode = Literal["ipv4-wildcard", "ipv6-wildcard", "loopback", "silent", "http"]
SQUATTER_MODES: tuple[str, ...] = get_args(SquatterMode)

#: What a world calls with each message of its nodes (from any thread, in order for each
#: node; see :mod:`harness.world.messages`).
OnMessage = Callable[[Message], None]


class Rule(Protocol):
    """A packet rule or a bandwidth limit, in place until lifted."""

    def lift(self) -> None:
        """Remove it (idempotent); what it counted stays readable."""

    def acted(self) -> dict[str, int] | Uncounted:
        """What it did: effect -> count (read after :meth:`World.teardown`)."""


@dataclass(frozen=True)
class Uncounted:
    """The world cannot tell what a fault did; ``why`` says so in a sentence."""

    why: str


class Toxic(Protocol):
    """A toxic on some nodes' links."""

    def remove(self) -> None:
        """Take the toxic off every link it is on."""

    def effects(self) -> ToxicEffects | Uncounted:
        """What it did (read after :meth:`World.teardown`)."""


class Link(Protocol):
    """Some nodes' links, down."""

    def up(self) -> None:
        """Bring the links up again."""

    def cuts(self) -> int | Uncounted:
        """How many open connections going down cut (read after :meth:`World.teardown`)."""


class Names(Protocol):
    """The endpoint's host name, not resolving."""

    def up(self) -> None:
        """Make the name resolve again."""

    def failed(self) -> int:
        """How many lookups of the name failed since it went down."""


class Squatter(Protocol):
    """The squatter holding the store's port (:attr:`Layout.squatter`)."""

    def release(self) -> None:
        """Stop holding the port (idempotent)."""

    @property
    def acted(self) -> dict[str, int]:
        """What it did so far: effect -> count, non-zero counts only."""


class World(Protocol):
    """Where one run's nodes live; see the module docstring for the verbs."""

    @property
    def name(self) -> str:
        """Short and lowercase: ``local``, ``netns``, ``ray``."""

    @property
    def capabilities(self) -> frozenset[str]:
        """What this world can do (names from :data:`CAPABILITIES`, or a fault kind's own)."""

    def build(self, seed: int) -> None:
        """Create the network of the :class:`Layout`; ``seed`` seeds the world's own
        randomness (toxicity rolls, jitter). Cleans up what it made before raising."""

    def start(self, launch: Launch) -> None:
        """Start node ``launch.node`` (again, after it ended: a new incarnation). A node is
        one incarnation at a time: one still running is killed first (as by :meth:`kill`).
        May be called from several threads at once (for different nodes). Until
        :meth:`release`, a node started says ``ready`` once it is up and then waits at the
        start gate; after it, a node goes on at once (``ready`` then ``started``)."""

    def release(self) -> None:
        """Open the start gate: every node waiting at it goes on, all together (one
        operation, not one per node). Idempotent; nodes started later do not wait."""

    def kill(self, node: int) -> bool:
        """End the node at once, without warning; False when it was not running (ended,
        or killed already)."""

    def pause(self, node: int) -> bool:
        """Freeze the node; False when it was not running."""

    def resume(self, node: int) -> bool:
        """Let a frozen node go on; False when it was not running."""

    def paused(self, node: int) -> bool:
        """Whether the node is frozen right now."""

    def kill_part(self, node: int, part: str) -> bool:
        """End one part of a job node at once (``agent``: its process alone, its workers
        end by their death signal; ``worker N``: that worker, which its agent sees fail);
        False when that part was not running. A world without :data:`JOBS` raises
        :class:`~harness.errors.UnsupportedError`."""

    def pause_part(self, node: int, part: str) -> bool:
        """Freeze one part of a job node; False when it was not running."""

    def resume_part(self, node: int, part: str) -> bool:
        """Let a frozen part of a job node go on; False when it was not running."""

    def live(self, node: int) -> int:
        """How many incarnations of the node are running now (started, neither killed nor
        ended): never more than one."""

    def add_toxic(self, nodes: Sequence[int], toxic: ToxicSpec) -> Toxic:
        """Put ``toxic`` on the links of ``nodes``."""

    def link_down(self, nodes: Sequence[int]) -> Link:
        """Take the links of ``nodes`` down: open connections cut, new ones refused."""

    def names_down(self) -> Names:
        """Make the endpoint's host name stop resolving (``EAI_NONAME``) on every node."""

    def squatter(self) -> Squatter:
        """The squatter :attr:`Layout.squatter` asked for."""

    def add_store_rule(self, rule: StoreRule) -> None:
        """Apply ``rule`` to the store requests of its nodes; ``rule.fired`` counts."""

    def add_packet_rule(self, rule: PacketRule) -> Rule:
        """Put ``rule`` on the network between nodes (capability :data:`PACKETS`).

        Raises:
            UnsupportedError: the world has no packet rules.
        """

    def limit_bandwidth(self, nodes: Sequence[int], rate_kbit: int, direction: str) -> Rule:
        """Limit the ``nodes``' traffic to ``rate_kbit`` kbit/s, ``direction`` ``in`` (to
        them), ``out`` (from them) or ``both`` (capability :data:`BANDWIDTH`).

        Raises:
            UnsupportedError: the world cannot limit bandwidth.
        """

    def stop_nodes(self, grace: float) -> None:
        """Give the nodes ``grace`` seconds to end, then kill the rest (idempotent)."""

    def teardown(self) -> list[str]:
        """Remove everything the world made (idempotent). Counts stay readable.

        Returns:
            What was left behind or could not be removed, one line each (leaks).
        """

    def output(self, node: int) -> str | None:
        """The tail of what the node wrote (after :meth:`stop_nodes`); None if nothing."""

    def link_log(self) -> list[dict[str, Any]] | None:
        """The event log of every link a toxic or link_down acted on (None: none kept)."""


@runtime_checkable
class Interruptible(Protocol):
    """A world whose start-up waits long (on a cluster: tens of seconds) and can give up.

    The runner hands such a world the run's stop event (set on Ctrl-C) before
    :meth:`World.build`; from then on, a wait of :meth:`World.build`, :meth:`World.start`
    or :meth:`World.release` gives up soon after the event is set, raising an
    :class:`~harness.errors.HarnessError` (the run then ends as interrupted).
    """

    def interrupt_on(self, stop: threading.Event) -> None:
        """Give up waiting once ``stop`` is set."""


class WorldFactory(Protocol):
    """Makes the world of one run (what :func:`harness.run.runner.run_scenario` takes)."""

    @property
    def name(self) -> str:
        """The name of the worlds it makes."""

    @property
    def capabilities(self) -> frozenset[str]:
        """What the worlds it makes can do."""

    def __call__(self, layout: Layout, on_message: OnMessage) -> World:
        """A world for ``layout`` that reports what its nodes do to ``on_message``."""


def missing(capabilities: frozenset[str], needs: frozenset[str]) -> list[str]:
    """The capabilities of ``needs`` a world lacks, sorted."""
    return sorted(needs - capabilities)


def cannot(world: str, capability: str, why: str = "") -> UnsupportedError:
    """``the <world> world cannot <what the capability means>`` (+ ``: why``)."""
    what = CAPABILITIES.get(capability, f"do {capability!r}")
    text = f"the {world} world cannot {what}"
    return UnsupportedError(f"{text}: {why}" if why else text, world=world, capability=capability)


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP address literal (not a name to resolve)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
