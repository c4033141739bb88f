"""How the Ray world groups a run's nodes into actors (each node start is kept in the
shared book of :mod:`harness.world.incarnations`).

Group 0 is node 0 alone (the store host); groups ``1..`` hold ``pack`` nodes each, in node
order. A group of one node is a whole process (its faults are real); a larger one hosts its
nodes as threads (kill and pause emulated, as in the packed world).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["DEFAULT_GROUPS", "Group", "default_pack", "placement", "plan"]


@dataclass(eq=False)
class Group:
    """One actor's nodes, and the actor hosting them now."""

    index: int
    nodes: range
    actor: Any = None
    generation: int = 0  # actors made for it so far (a kill and a restart: one more)
    host: str = ""  # the Ray node id it runs on
    pid: int = 0
    offset: float = 0.0  # its host's monotonic clock minus ours
    synced: bool = False  # its current actor is up and watched
    dead: bool = False  # its actor was killed here, or died
    ended: bool = False  # its actor said all its nodes ended after close
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def whole(self) -> bool:
        """The group is one node: its process is the node's (kill and pause are real)."""
        return len(self.nodes) == 1


#: Actors the nodes ``1..N-1`` of a large run are packed into when no ``pack`` is given.
DEFAULT_GROUPS: Final = 16


def default_pack(nodes: int, pack: int | None) -> int:
    """Nodes per actor: ``pack``, else 1 (each node a process) for up to 17 nodes, else
    enough for :data:`DEFAULT_GROUPS` actors."""
    if pack is not None:
        return pack
    if nodes <= DEFAULT_GROUPS + 1:
        return 1
    return math.ceil((nodes - 1) / DEFAULT_GROUPS)


def plan(nodes: int, pack: int) -> list[Group]:
    """Node 0 alone, then ``pack`` nodes per group."""
    groups = [Group(0, range(0, 1))]
    for first in range(1, nodes, pack):
        groups.append(Group(len(groups), range(first, min(first + pack, nodes))))
    return groups


def placement(size: int, address: str, host_id: str) -> str:
    """The report's placement text of the nodes of a group of ``size`` on a host."""
    where = f"on host {address} (Ray node {host_id[:8]})"
    if size == 1:
        return f"ray: its own actor {where}; kill and pause act on the actor's process"
    return (
        f"ray: {size} nodes per actor as threads {where} (kill, pause emulated; "
        "maxrss is the actor's)"
    )
