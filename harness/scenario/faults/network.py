"""Fault kinds on the network between nodes and the store: ``toxic``, ``link_down``, ``dns``."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from harness.scenario.faults.base import Context, Heal, Timed, Whole
from harness.scenario.faults.checks import needs_a_host_name, not_node_0, on_a_proxy_link
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.format import Nodes
from harness.scenario.format import targets as resolve
from harness.world.base import (
    LINKS,
    NAMES,
    TOXIC_ATTRIBUTES,
    TOXICS,
    ToxicSpec,
    Uncounted,
    World,
)

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

__all__ = ["DnsFault", "LinkFault", "ToxicFault"]

#: Latency plus jitter (ms) per second of join timeout that cannot fail a join (a join is
#: about ten round trips).
_HARMLESS_MS_PER_S = 20
#: The longest slicer delay (microseconds) that cannot fail a join.
_HARMLESS_SLICER_DELAY = 1000


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

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """On some workers' links: latency well under the join timeout or at least as long,
        a slicer, a noop, or for a while (from a trigger) a ``reset_peer`` or a black hole
        (``timeout``), on every connection or half of them."""
        if not outline.workers:
            return None
        from harness.scenario.faults.draws import built

        return built(lambda draw: _toxic(draw, outline))

    def effect(self, outline: Outline) -> Effect:
        """Harmless: latency plus jitter up to 20 ms per second of join timeout for good, a
        noop, or a slicer delaying up to 1 ms."""
        spread = self.attributes.get("latency", 0) + self.attributes.get("jitter", 0)
        if self.type == "latency":
            harmless = spread <= outline.join * _HARMLESS_MS_PER_S and self.duration is None
        else:
            delay = self.attributes.get("delay", 0)
            harmless = self.type in ("noop", "slicer") and delay <= _HARMLESS_SLICER_DELAY
        return Effect(harmless=harmless, hides_close=frozenset(resolve(outline.count, self.nodes)))

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


def _toxic(draw: DrawFn, outline: Outline) -> dict[str, Any]:
    from hypothesis import strategies as st

    from harness.scenario.faults.draws import links, tenths, trigger

    join = outline.join
    fault = {"kind": "toxic", "nodes": draw(links(outline))}
    stream = draw(st.sampled_from(["upstream", "downstream"]))
    what = draw(
        st.sampled_from(["latency", "slow-latency", "slicer", "noop", "reset_peer", "timeout"])
    )
    if what == "latency":  # well under the timeout
        latency = draw(st.integers(1, max(1, round(join * 1000 / 100))))
        jitter = draw(st.integers(0, latency // 4))
        attributes = {"latency": latency, "jitter": jitter}
        return {**fault, "type": "latency", "stream": stream, "attributes": attributes}
    if what == "slow-latency":  # at least the timeout: someone must time out or fail
        latency = draw(st.integers(round(join * 1000), round(join * 1500)))
        return {**fault, "type": "latency", "stream": stream, "attributes": {"latency": latency}}
    if what == "slicer":
        size = draw(st.integers(1, 8))
        variation, delay = draw(st.integers(0, size - 1)), draw(st.integers(0, 100))
        attributes = {"average_size": size, "size_variation": variation, "delay": delay}
        return {**fault, "type": "slicer", "stream": "downstream", "attributes": attributes}
    if what == "noop":
        return {**fault, "type": "noop", "stream": stream}
    return {
        **fault,
        "type": what,
        "stream": stream,
        "attributes": {"timeout": 0},
        "duration": draw(tenths(0.2, join)),
        "toxicity": draw(st.sampled_from([1.0, 0.5])),
        **draw(trigger(outline)),
    }


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

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """Some workers' links down for 0.2 s up to the join timeout, from a trigger."""
        if not outline.workers:
            return None
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import links, tenths, trigger

        return st.tuples(links(outline), tenths(0.2, outline.join), trigger(outline)).map(
            lambda found: {
                "kind": "link_down",
                "nodes": found[0],
                "duration": found[1],
                **found[2],
            }
        )

    def effect(self, outline: Outline) -> Effect:
        return Effect(hides_close=frozenset(resolve(outline.count, self.nodes)))

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
