"""Faults on proxied links, shared by the worlds whose nodes reach the store through the
embedded proxy (the local world's one server, the Ray world's agent on every host).

* :class:`ProxiedToxic` — a toxic put on some nodes' links (``Toxic`` of world/base.py);
* :class:`ProxiedLink` — some nodes' links taken down (``Link`` of world/base.py);
* :class:`Downs` — how many times each node's link went down, so that a
  :class:`ProxiedLink` counts the cuts of its own time down only.

A world supplies what differs: how to take the toxic off or bring the links up, how to
read the proxy's event log (None when it cannot be read: the effects are then
:class:`~harness.world.base.Uncounted`, with the world's reason), and each node's link name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.proxy.events import link_cuts, toxic_effects
from harness.world.base import ToxicEffects, ToxicSpec, Uncounted

__all__ = ["Downs", "LogRows", "ProxiedLink", "ProxiedToxic"]

#: The proxy's event log as a world reads it: None when it cannot be read.
LogRows = list[dict[str, Any]] | None


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
    """How many times each node's link has gone down in a run."""

    _count: dict[int, int] = field(default_factory=dict)

    def take(self, nodes: Iterable[int]) -> dict[int, int]:
        """Count one more time down for each of ``nodes``; return how many each had before."""
        before = {node: self._count.get(node, 0) for node in nodes}
        for node, count in before.items():
            self._count[node] = count + 1
        return before
