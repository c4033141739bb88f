"""Which incarnation of each node is live: the bookkeeping of worlds whose nodes are threads.

A node is one incarnation at a time (one process, or one thread of a packed process or a
Ray actor). The packed world (:mod:`harness.world.packed.world`) and the Ray world
(:mod:`harness.world.ray.world`) number every start of a node and keep here what each
incarnation is now: launched paused, paused, killed, ended. :meth:`Incarnations.begin`
hands a world the live incarnation a new start replaces, so that the world ends it first;
messages of a killed incarnation are never delivered (:meth:`Incarnations.deliverable`).

Invariants:

1. At most one incarnation per node is live (neither killed nor ended) once a world's
   ``start`` has returned: the world kills what :meth:`Incarnations.begin` returns.
2. A killed incarnation says nothing more: :meth:`Incarnations.deliverable` drops it.
3. An incarnation ends once: by its outcome, or by the loss of what hosted it
   (:meth:`Incarnations.lose`), whichever comes first.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Container
from dataclasses import dataclass

from harness.world.messages import Message, ends

__all__ = ["HeldNodes", "Incarnation", "Incarnations"]


@dataclass(eq=False)
class Incarnation:
    """One start of a node."""

    number: int
    node: int
    frozen: bool = False  # launched paused, not resumed yet
    paused: bool = False  # stopped (a whole process) or its link holds its data
    killed: bool = False
    ended: bool = False  # reported its outcome (or what hosted it is gone)

    @property
    def live(self) -> bool:
        """Neither killed nor ended."""
        return not (self.killed or self.ended)


class Incarnations:
    """Every incarnation of one run's nodes, by number, and each node's latest."""

    def __init__(self) -> None:
        self._all: dict[int, Incarnation] = {}
        self._latest: dict[int, Incarnation] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    def begin(self, node: int, frozen: bool) -> tuple[Incarnation, Incarnation | None]:
        """A new incarnation of ``node`` (launched paused when ``frozen``), now its latest.

        Returns:
            The new incarnation, and the one it replaces if that is still live: the caller
            must kill it (a node is one incarnation at a time).
        """
        with self._lock:
            inc = Incarnation(next(self._numbers), node, frozen=frozen)
            before = self._latest.get(node)
            self._all[inc.number] = inc
            self._latest[node] = inc
        return inc, (before if before is not None and before.live else None)

    def latest(self, node: int) -> Incarnation | None:
        """The node's latest incarnation, live or not (None: never started)."""
        with self._lock:
            return self._latest.get(node)

    def running(self, node: int) -> Incarnation | None:
        """The node's latest incarnation if it is live."""
        inc = self.latest(node)
        return inc if inc is not None and inc.live else None

    def live(self, node: int) -> int:
        """How many incarnations of ``node`` are live (invariant 1: at most one)."""
        with self._lock:
            return sum(1 for inc in self._all.values() if inc.node == node and inc.live)

    def deliverable(self, number: int, message: Message) -> bool:
        """Whether a message of incarnation ``number`` goes on to the runner (not when it
        was killed, or is unknown); the node's outcome ends the incarnation."""
        with self._lock:
            inc = self._all.get(number)
        if inc is None or inc.killed:
            return False
        if ends(message):
            inc.ended = True
        return True

    def lose(self, nodes: Container[int]) -> list[Incarnation]:
        """End the live latest incarnations of ``nodes`` (what hosted them is gone);
        returns them, for the world to report each one's exit."""
        with self._lock:
            lost = [inc for node, inc in self._latest.items() if node in nodes and inc.live]
            for inc in lost:
                inc.ended = True
        return lost


class HeldNodes:
    """Kill, pause and resume of nodes that are threads of a shared host (a packed process,
    a Ray actor): the bookkeeping the packed and the Ray world share, composed into each.

    A world hands it its book and three acts: ``send(node, command)`` gives a command
    (``("kill", number)``, ``("resume", number)``) to the host of ``node``; ``hold(node)``
    pauses the node (on its link: its process cannot be stopped for it alone), ``unhold``
    lets it go on; ``kill`` (default :meth:`end`) kills an incarnation, for a world that
    kills some otherwise (the Ray world: a node alone in its actor, with the actor). A kill
    unholds a paused node first, so that its resets reach the store now, not when the link
    is healed.
    """

    def __init__(
        self,
        book: Incarnations,
        send: Callable[[int, tuple[str, int]], object],
        hold: Callable[[int], None],
        unhold: Callable[[int], None],
        kill: Callable[[Incarnation], None] | None = None,
    ) -> None:
        self.book = book
        self._send = send
        self._hold = hold
        self._unhold = unhold
        self._kill = kill or self.end

    def end(self, inc: Incarnation) -> None:
        """Kill incarnation ``inc``: nothing it sends from now on is delivered."""
        inc.killed = True
        if inc.paused:
            self._unhold(inc.node)
            inc.paused = False
        self._send(inc.node, ("kill", inc.number))

    def kill(self, node: int) -> bool:
        """Kill the node's live incarnation; False when it has none."""
        inc = self.book.running(node)
        if inc is None:
            return False
        self._kill(inc)
        return True

    def pause(self, node: int) -> bool:
        """Hold the node's live incarnation (once); False when it has none."""
        inc = self.book.running(node)
        if inc is None:
            return False
        if not inc.paused:
            self._hold(node)
            inc.paused = True
        return True

    def resume(self, node: int) -> bool:
        """Let the node go on: its latest incarnation's hold is lifted even if it ended
        meanwhile (not if it was killed: nothing is held then), and a live one launched
        paused is resumed; False when it has no live incarnation."""
        latest = self.book.latest(node)
        if latest is not None and latest.paused and not latest.killed:
            self._unhold(node)
            latest.paused = False
        inc = self.book.running(node)
        if inc is None:
            return False
        if inc.frozen:
            inc.frozen = False
            self._send(node, ("resume", inc.number))
        return True

    def paused(self, node: int) -> bool:
        """Whether the node's live incarnation is held or launched paused, not resumed."""
        inc = self.book.running(node)
        return inc is not None and (inc.frozen or inc.paused)
