"""What a fault did in one run: when it held, on which nodes, and what it acted on.

A fault kind fills in its own record (:meth:`~harness.scenario.faults.base.Fault.inject`);
the runner keeps the records and reports show them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FaultRecord"]


@dataclass
class FaultRecord:
    """A fault as it was actually applied (for the timeline and for replay), and what it did.

    Attributes:
        acted: what the fault did, counted by its kind from what the world reports (the
            proxy's event log, the store rules, the DNS shims, the squatter, the signals and
            starts it sent): effect -> count, e.g. ``{"connections reset": 2}``. Empty when
            the fault never acted; ``None`` when its effects could not be counted
            (``uncounted`` says why, e.g. a real Toxiproxy keeps no event log). The runner
            creates every record with ``{}``.
        note: what is known about a fault that did not act (e.g. how many connections it
            was in place on).
        reached: False when the run was interrupted before the fault acted: it never had
            the chance, which is not the same as "did not act" (not idle, no warning).
        fired: False when the fault never acted on the world at all: its time or its
            node's event did not come before the run ended (then it did not act, and
            ``note`` says why) or before it was interrupted (then it was not reached).
            ``start`` and ``end`` are then when the run ended, and ``detail`` is when the
            fault was due (``at 30.00 s``).
        expected_idle: the scenario expects the fault not to act (``[expect]
            idle_faults``): idle, it is no warning; acting, it fails the run.
    """

    index: int
    kind: str
    nodes: list[int]
    start: float
    end: float | None = None
    detail: str = ""
    acted: dict[str, int] | None = None
    uncounted: str = ""
    note: str = ""
    reached: bool = True
    fired: bool = True
    expected_idle: bool = False

    def count(self, effect: str, n: int = 1) -> None:
        """Add ``n`` to the count of ``effect`` (``n`` of 0 records nothing)."""
        if n <= 0:
            return
        if self.acted is None:
            self.acted, self.uncounted = {}, ""
        self.acted[effect] = self.acted.get(effect, 0) + n

    def not_counted(self, why: str) -> None:
        """Mark the fault's effects as unknown, saying why."""
        self.acted, self.uncounted = None, why

    @property
    def idle(self) -> bool:
        """True when the fault's effects were counted and it did nothing although the run
        gave it the chance (an interrupted run's faults that did nothing were not reached)."""
        return self.reached and self.acted is not None and not any(self.acted.values())

    @property
    def flagged(self) -> bool:
        """True when the fault is idle and the scenario did not expect that: the reports
        warn about it."""
        return self.idle and not self.expected_idle

    @property
    def effects(self) -> str:
        """What the fault did, in words: ``11 connections reset``, ``did not act (in place
        on 2 connections, ...)``, or why it was not counted."""
        if self.acted is None:
            return self.uncounted or "not counted"
        if not self.reached:
            return "not reached: the run was interrupted before it acted"
        if self.idle:
            said = f"did not act ({self.note})" if self.note else "did not act"
            return f"{said}, as expected" if self.expected_idle else said
        return ", ".join(_counted(n, effect) for effect, n in self.acted.items() if n)


def _counted(n: int, effect: str) -> str:
    """``2 connections reset``; ``1 connection reset`` (the first plural word before any
    parenthesis is made singular)."""
    if n != 1:
        return f"{n} {effect}"
    head, paren, tail = effect.partition("(")
    words = head.split(" ")
    for i, word in enumerate(words):
        if word.endswith("s") and len(word) > 1:
            words[i] = word[:-1]
            break
    return f"1 {' '.join(words)}{paren}{tail}"
