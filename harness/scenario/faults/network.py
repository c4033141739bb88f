"""Fault kinds on the network between nodes and the store: ``toxic``, ``link_down``, ``dns``."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.scenario.faults.base import Context, Heal, Timed, Whole
from harness.scenario.faults.checks import needs_a_host_name, not_node_0, on_a_proxy_link
from harness.scenario.format import Nodes
from harness.world.base import (
    LINKS,
    NAMES,
    TOXIC_ATTRIBUTES,
    TOXICS,
    ToxicSpec,
    Uncounted,
    World,
)

__all__ = ["DnsFault", "LinkFault", "ToxicFault"]


class ToxicFault(Timed):
    """A Toxiproxy toxic on each targeted node's link."""

    kind: Literal["toxic"]
    nodes: Nodes = "others"
    type: Literal[
        "latency",
        "bandwidth",
        "slow_close",
        "timeout",
        "reset_peer",
        "slicer",
        "limit_data",
        "noop",
    ]
    stream: Literal["upstream", "downstream"] = "downstream"
    toxicity: float = Field(default=1.0, ge=0, le=1)
    #: Milliseconds, bytes, KB/s: never negative (a proxy takes ``rate = -1`` and stalls
    #: every byte, as Toxiproxy would; the node then fails for a reason nobody wrote).
    attributes: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    duration: float | None = Field(default=None, gt=0)
    needs: ClassVar[frozenset[str]] = frozenset({TOXICS})

    @property
    def label(self) -> str:
        return f"{self.kind} {self.type}"

    @field_validator("attributes")
    @classmethod
    def _known_attributes(cls, value: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        """Only the toxic type's own attributes: an unknown one would be ignored (by the
        proxy, as by Toxiproxy), and the toxic would silently do something else."""
        toxic = info.data.get("type")
        if toxic is None:  # the type itself is wrong: that is the error to show
            return value
        takes = TOXIC_ATTRIBUTES[toxic]
        for name in value:
            if name not in takes:
                close = difflib.get_close_matches(name, takes, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                allowed = f"takes: {', '.join(map(repr, takes))}" if takes else "takes none"
                raise ValueError(
                    f"{name!r} is not an attribute of a {toxic} toxic; {hint}"
                    f"a {toxic} toxic {allowed}"
                )
        return value

    @classmethod
    def where_key_goes(cls, key: str, table: Mapping[str, Any]) -> str | None:
        toxic = table.get("type")
        if not isinstance(toxic, str) or key not in TOXIC_ATTRIBUTES.get(toxic, ()):
            return None
        return f"a {toxic} toxic's {key!r} goes in its attributes: attributes = {{ {key} = ... }}"

    def check(self, index: int, whole: Whole) -> list[str]:
        return not_node_0(index, whole, self.nodes) + on_a_proxy_link(index, whole, self.kind)

    def lasts(self) -> float | None:
        return self.duration

    def inject(self, world: World, ctx: Context) -> Heal:
        targets = ctx.targets(self.nodes)
        spec = ToxicSpec(
            f"f{ctx.index}-{self.type}", self.type, self.stream, self.toxicity, self.attributes
        )
        toxic = world.add_toxic(targets, spec)
        way = _WAYS[self.stream]
        record = ctx.record(targets, f"{self.type} {self.stream} ({way}) {self.attributes}")

        def tally() -> None:
            found = toxic.effects()
            if isinstance(found, Uncounted):
                record.not_counted(found.why)
                return
            for effect, n in found.effects.items():
                record.count(effect, n)
            if record.idle:
                record.note = _reach(found.applied, found.skipped, self.type)

        ctx.tally(tally)
        return toxic.remove


#: Which way the data a toxic acts on flows (one stream: one way only).
_WAYS = {"upstream": "node to store only", "downstream": "store to node only"}


def _reach(applied: int, skipped: int, toxic_type: str) -> str:
    """Why a toxic that never acted did nothing, as far as the proxy's log tells."""
    if toxic_type == "noop":
        return "a noop toxic never acts"
    if applied == 0 and skipped == 0:
        return "no connection was open on the link while it was in place"
    if applied == 0:
        return f"its toxicity roll left out all {skipped} connection(s) it met"
    what = "data reached it" if toxic_type != "slow_close" else "a connection closed"
    s = "" if applied == 1 else "s"
    return f"in place on {applied} connection{s}, but no {what} there"


#: Node events that show connection attempts (rdzv emits them; torch's handler does not).
_CONNECT_EVENTS = frozenset({"connect_attempt", "connected"})


class LinkFault(Timed):
    """The targeted links go down: open connections are cut, new ones refused."""

    kind: Literal["link_down"]
    nodes: Nodes = "others"
    duration: float | None = Field(default=None, gt=0)
    needs: ClassVar[frozenset[str]] = frozenset({LINKS})

    def check(self, index: int, whole: Whole) -> list[str]:
        return not_node_0(index, whole, self.nodes) + on_a_proxy_link(index, whole, self.kind)

    def lasts(self) -> float | None:
        return self.duration

    def inject(self, world: World, ctx: Context) -> Heal:
        targets = ctx.targets(self.nodes)
        link = world.link_down(targets)
        record = ctx.record(targets, "connections refused")

        def tally() -> None:
            end = record.end if record.end is not None else math.inf
            refused = sum(
                1
                for node in targets
                for event in ctx.events(node)
                if event.event == "connect_attempt"
                and record.start <= event.t <= end
                and "refused" in str(event.fields.get("error") or "").lower()
            )
            cut = link.cuts()
            if isinstance(cut, Uncounted):
                record.not_counted(cut.why)
            else:
                record.count("connections cut", cut)
            record.count("connection attempts refused (as the nodes saw them)", refused)
            reported = any(
                event.event in _CONNECT_EVENTS for node in targets for event in ctx.events(node)
            )
            if record.idle and not reported:  # refusals it may have caused went unseen
                record.not_counted(
                    "no connection was cut, and the nodes' backend reports no connection "
                    "attempts, so refused ones could not be counted"
                )

        ctx.tally(tally)
        return link.up


class DnsFault(Timed):
    """The endpoint's host name stops resolving (``EAI_NONAME``)."""

    kind: Literal["dns"]
    nodes: Nodes = "all"
    duration: float | None = Field(default=None, gt=0)
    needs: ClassVar[frozenset[str]] = frozenset({NAMES})

    def check(self, index: int, whole: Whole) -> list[str]:
        return needs_a_host_name(index, whole, self.kind)

    def lasts(self) -> float | None:
        return self.duration

    def inject(self, world: World, ctx: Context) -> Heal:
        names = world.names_down()
        record = ctx.record(ctx.targets(self.nodes), f"{ctx.host} does not resolve")
        settled = False

        def settle() -> None:  # once: at the heal, or at the end if it never heals
            nonlocal settled
            if not settled:
                settled = True
                record.count("lookups failed", names.failed())

        ctx.tally(settle)

        def heal() -> None:
            names.up()
            settle()

        return heal
