"""Fault kinds on the store: ``store_op`` (one operation on some keys) and ``squatter`` (a
listener holding the store's port before node 0 starts)."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field

from harness.scenario.faults.base import Context, Fault, Heal, Timed, Whole
from harness.scenario.faults.checks import not_node_0
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.faults.record import FaultRecord
from harness.scenario.format import Nodes, targets
from harness.world.base import SQUATTER, STORE_RULES, Layout, SquatterMode, StoreRule, World

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["SquatterFault", "StoreOpFault"]


def _count_all(record: FaultRecord, acted: dict[str, int]) -> None:
    for effect, n in acted.items():
        record.count(effect, n)


class StoreOpFault(Timed):
    """Requests of one operation on matching keys are delayed, dropped or failed."""

    kind: Literal["store_op"]
    nodes: Nodes = "others"
    op: Literal[
        "*", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS", "DELETE_KEY",
        "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "QUEUE_PUSH", "QUEUE_POP",
        "QUEUE_LEN", "LIST_KEYS", "BARRIER",
    ]  # fmt: skip
    keys: str = "*"
    action: Literal["delay", "drop", "fail"]
    delay: float = Field(default=0.0, ge=0)
    count: Annotated[int, Field(ge=1)] | Literal["all"] = 1
    needs: ClassVar[frozenset[str]] = frozenset({STORE_RULES})

    @property
    def label(self) -> str:
        return f"{self.kind} {self.action} {'any op' if self.op == '*' else self.op}"

    def check(self, index: int, whole: Whole) -> list[str]:
        return not_node_0(index, whole, self.nodes)

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """One or two requests of a rendezvous operation on some workers' links, delayed
        (0.1 s up to an eighth of the join timeout: harmless), dropped or failed."""
        if not outline.workers:
            return None
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import links, tenths

        common = {
            "kind": st.just("store_op"),
            "nodes": links(outline),
            "op": st.sampled_from(["SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT"]),
            "keys": st.sampled_from(["*", "__rdzv__/*", "*/claim/*", "*/count"]),
            "count": st.integers(1, 2),
        }
        delayed = st.fixed_dictionaries(
            {**common, "action": st.just("delay"), "delay": tenths(0.1, outline.join / 8)}
        )
        lost = st.fixed_dictionaries({**common, "action": st.sampled_from(["drop", "fail"])})
        return st.one_of(delayed, lost)

    def effect(self, outline: Outline) -> Effect:
        """Harmless: delays adding up to at most a quarter of the join timeout."""
        total = None if self.count == "all" else self.delay * self.count
        harmless = self.action == "delay" and total is not None and total <= outline.join / 4
        return Effect(harmless=harmless, hides_close=frozenset(targets(outline.count, self.nodes)))

    def shape(self, layout: Layout) -> Layout:
        return dataclasses.replace(layout, store_rules=True)

    def inject(self, world: World, ctx: Context) -> None:
        targets = ctx.targets(self.nodes)
        count = sys.maxsize if self.count == "all" else self.count
        rule = StoreRule(self.op, self.keys, self.action, self.delay, count, frozenset(targets))
        world.add_store_rule(rule)
        record = ctx.record(targets, f"{self.action} {self.op} on {self.keys}")
        ctx.tally(lambda: _count_all(record, rule.acted))


class SquatterFault(Fault):
    """Before anything starts, another listener holds node 0's port."""

    kind: Literal["squatter"]
    mode: SquatterMode
    duration: float | None = Field(default=None, gt=0)
    needs: ClassVar[frozenset[str]] = frozenset({SQUATTER})

    @property
    def label(self) -> str:
        return f"{self.kind} {self.mode}"

    def check(self, index: int, whole: Whole) -> list[str]:
        earlier = [i for i, f in whole.faults if i < index and isinstance(f, SquatterFault)]
        if not earlier:
            return []
        return [
            (
                f"fault[{index}]: only one squatter can hold node 0's port (fault[{earlier[-1]}] "
                "is one already)"
            )
        ]

    def shape(self, layout: Layout) -> Layout:
        return dataclasses.replace(layout, squatter=self.mode)

    def lasts(self) -> float | None:
        return self.duration

    def inject(self, world: World, ctx: Context) -> Heal:
        record = ctx.record([0], self.mode)
        squatter = world.squatter()
        ctx.tally(lambda: _count_all(record, squatter.acted))
        return squatter.release
