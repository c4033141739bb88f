"""What a fault kind tells the fuzzer: the scenario it is drawn for, and what it may do.

A kind's ``draw`` hook (:class:`~harness.scenario.faults.base.Fault`) gets an
:class:`Outline` and returns a hypothesis strategy of the kind's ``[[fault]]`` tables; its
``effect`` hook gets the :class:`Outline` of the scenario the fault is in and returns its
:class:`Effect`: whether it can make a rendezvous fail, which outcomes it adds on which
nodes, and what the oracle's rule on a run's order must know of it. The fuzzer
(:mod:`harness.fuzz`) reads these and nothing else of a kind.

No hypothesis here: the kinds import it inside ``draw`` (see :mod:`.draws`), so loading
scenarios never imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Effect", "Outline"]


@dataclass(frozen=True)
class Outline:
    """What a fault kind may know of a scenario, to draw itself or to say what it does.

    Attributes:
        count: how many nodes the scenario has.
        join: its join timeout, in seconds.
        capabilities: what the world it runs in can do (a kind is drawn only where its
            ``needs`` are among them; its ``draw`` need not check that again).
        host: the endpoint host the nodes are told.
        absent: the nodes that never start (faults drawn before, or the whole scenario's).
        free: the nodes a fault may still keep from starting: no fault drawn before acts
            on them or waits for their events (None: every node that starts).
    """

    count: int
    join: float
    capabilities: frozenset[str] = frozenset()
    host: str = "127.0.0.1"
    absent: frozenset[int] = frozenset()
    free: frozenset[int] | None = None

    @property
    def present(self) -> list[int]:
        """The nodes that start, in order."""
        return [n for n in range(self.count) if n not in self.absent]

    @property
    def workers(self) -> list[int]:
        """The nodes that start, but node 0 (which hosts the store and has no link)."""
        return [n for n in self.present if n != 0]

    @property
    def keepable(self) -> list[int]:
        """The nodes a fault may keep from starting (:attr:`free`), in order."""
        free = set(self.present) if self.free is None else self.free
        return [n for n in self.present if n in free]


@dataclass(frozen=True)
class Effect:
    """What one fault may do to a run's outcomes (its kind's word on it).

    Attributes:
        harmless: it cannot make a rendezvous fail within the join timeout (latency well
            under it, a short late start, ...): with only harmless faults the outcome is
            decided. A fault that keeps nodes from starting says so in ``never_starts``
            and is harmless otherwise.
        allows: node -> outcomes it may end with besides the open ones (``ok``, ``timeout``,
            ``connection_error``): ``killed`` on a kill's targets.
        kills: nodes it may end for good (the oracle's ``dead_member`` rule judges what
            the others did after that).
        restarts: nodes it may end and start again (a replacement can take a dead
            member's place: the ``dead_member`` rule leaves them alone).
        holds: node -> seconds it may hold the node still (a pause): added to the node's
            ``elapsed`` bound and the hard deadline. Holding node 0 at any time leaves
            the order of a run unjudged.
        hides_close: nodes whose connections' close node 0 may learn late or never (a
            held, slowed or filtered link): a kill there is not judged by order.
    """

    harmless: bool = False
    allows: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    kills: frozenset[int] = frozenset()
    restarts: frozenset[int] = frozenset()
    holds: Mapping[int, float] = field(default_factory=dict)
    hides_close: frozenset[int] = frozenset()

    @classmethod
    def killing(cls, nodes: Iterable[int]) -> Effect:
        """A fault that ends ``nodes`` for good: outcome ``killed`` allowed there."""
        ended = frozenset(nodes)
        return cls(allows=dict.fromkeys(ended, ("killed",)), kills=ended)
