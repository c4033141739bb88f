"""A fault kind defined outside the harness package, as a user would write one: ``crash``
ends one node at once, for a reason the report shows. Tests register it for a while
(``FAULTS.registered(CrashFault)``): tests/harness/test_fault_registry.py runs it from a
scenario file, tests/harness/test_fuzz_kinds.py has the fuzzer draw and judge it."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy
from pydantic import Field

from harness.scenario.faults.base import Context, Timed, Whole
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.world.base import KILL, World


class CrashFault(Timed):
    """One node ends at once, for a reason the report shows."""

    kind: Literal["crash"]
    node: int = Field(ge=0)
    reason: str = Field(min_length=1)
    needs: ClassVar[frozenset[str]] = frozenset({KILL})

    def check(self, index: int, whole: Whole) -> list[str]:
        if self.node < whole.count:
            return []
        return [f"fault[{index}].node: there is no node {self.node}"]

    def inject(self, world: World, ctx: Context) -> None:
        record = ctx.record([self.node], self.reason)
        if world.kill(self.node):
            record.count("nodes crashed")
            ctx.finish(self.node, "killed", f"crashed: {self.reason}")
        record.end = record.start

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]]:
        """A node that starts, crashed at once or half a second in."""
        return st.fixed_dictionaries(
            {
                "kind": st.just("crash"),
                "node": st.sampled_from(outline.present),
                "reason": st.sampled_from(["disk on fire", "cosmic ray"]),
                "at": st.sampled_from([0.0, 0.5]),
            }
        )

    def effect(self, outline: Outline) -> Effect:
        """The node may end ``killed`` (and the ``dead_member`` rule judges what followed)."""
        return Effect.killing([self.node])
