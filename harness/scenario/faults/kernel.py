"""Fault kinds on the network between nodes, carried out by the kernel (the netns world):
``drop``, ``reject``, ``partition``, ``loss``, ``filter``, ``bandwidth``.

Each turns its keys into :class:`~harness.world.base.PacketRule` s (or a bandwidth limit),
lifts them as its heal, and counts what the kernel counted ("312 SYNs dropped"). A port
is a number or ``"store"`` (the port the store listens on). They need the ``packets`` (or
``bandwidth``) capability: the local world has neither, so a scenario with one of these is
reported unsupported there, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from harness.scenario.faults.base import Context, Heal, Timed, Trigger, Whole
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.faults.record import FaultRecord
from harness.scenario.format import Nodes, shown, targets
from harness.world.base import (
    BANDWIDTH,
    PACKETS,
    STORE_PORT,
    PacketRule,
    Rule,
    Uncounted,
    World,
)

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "BandwidthFault",
    "DropFault",
    "FilterFault",
    "LossFault",
    "PartitionFault",
    "RejectFault",
]


def _port_valid(port: int | str) -> int | str:
    """Checked per entry, so that an error names its key path (``fault[0].ports[1]``)."""
    if port != "store" and not 1 <= int(port) <= 65535:
        raise ValueError(f"a port is 'store' or a number from 1 to 65535, got {port!r}")
    return port


Port = Annotated[int | Literal["store"], AfterValidator(_port_valid)]
Direction = Literal["in", "out", "both"]


def _port_numbers(ports: Sequence[Port]) -> tuple[int, ...]:
    return tuple(STORE_PORT if port == "store" else int(port) for port in ports)


_NO_MATCH = "no packet matched while it was in place"


def _apply(
    world: World,
    ctx: Context,
    nodes: list[int],
    detail: str,
    rules: list[PacketRule],
    idle: str = _NO_MATCH,
) -> Heal:
    """Put ``rules`` in place, record them, count what they did at the end; returns the
    heal. ``idle``: the note when nothing matched."""
    placed: list[Rule] = [world.add_packet_rule(rule) for rule in rules]
    record = ctx.record(nodes, detail)
    ctx.tally(lambda: _count(record, placed, idle))

    def heal() -> None:
        for rule in placed:
            rule.lift()

    return heal


def _count(record: FaultRecord, placed: Sequence[Rule], idle: str) -> None:
    for rule in placed:
        found = rule.acted()
        if isinstance(found, Uncounted):
            record.not_counted(found.why)
            return
        for effect, n in found.items():
            record.count(effect, n)
    if record.idle:
        record.note = idle


def _store_only() -> list[Port]:
    return ["store"]


class _Kernel(Timed):
    """A kernel fault: in place from its trigger for ``duration`` seconds (or to the end);
    without ``at`` or ``on``, in place before any node starts (no SYN can slip through
    before the rule)."""

    duration: float | None = Field(default=None, gt=0)
    needs: ClassVar[frozenset[str]] = frozenset({PACKETS})

    def when(self) -> Trigger | None:  # type: ignore[override]
        if self.at is None and self.on is None:
            return None
        return super().when()

    def lasts(self) -> float | None:
        return self.duration

    @classmethod
    def _drawn(
        cls, outline: Outline, kind: str, keys: dict[str, Any]
    ) -> SearchStrategy[dict[str, Any]] | None:
        """Tables of ``kind`` with ``keys`` (strategies) from start-up to the end, or for a
        while from a trigger; ``None`` when the scenario has no worker to aim at."""
        from harness.scenario.faults.draws import windowed

        return windowed(outline, kind, keys) if outline.workers else None

    def _close_hidden(self, outline: Outline, nodes: Nodes) -> frozenset[int]:
        """``nodes``; every node when node 0 is one (it may then miss anyone's close)."""
        chosen = frozenset(targets(outline.count, nodes))
        return frozenset(range(outline.count)) if 0 in chosen else chosen


class _ToPorts(_Kernel):
    """Packets from ``nodes`` to ``to``'s ``ports`` (connection attempts only: ``syn_only``)."""

    nodes: Nodes = "others"
    to: Nodes = Field(default_factory=lambda: [0])
    ports: list[Port] = Field(default_factory=_store_only)
    syn_only: bool = True

    def _rule(self, ctx: Context, verdict: str, label: str) -> PacketRule:
        return PacketRule(
            sources=tuple(ctx.targets(self.nodes)),
            destinations=tuple(ctx.targets(self.to)),
            verdict=verdict,  # type: ignore[arg-type]
            ports=_port_numbers(self.ports),
            syn_only=self.syn_only,
            label=label,
        )

    def _detail(self) -> str:
        what = "connection attempts" if self.syn_only else "packets"
        return f"{what} to ports {shown(self.ports)} of node(s) {shown(self.to)}"

    @classmethod
    def _to_store(
        cls, outline: Outline, kind: str, **keys: Any
    ) -> SearchStrategy[dict[str, Any]] | None:
        """Some workers' connection attempts (or all their packets) to node 0's store."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import links

        keys = {"nodes": links(outline), "syn_only": st.booleans(), **keys}
        return cls._drawn(outline, kind, keys)

    def effect(self, outline: Outline) -> Effect:
        """Connection attempts only: no close is hidden; all packets: the sources' are."""
        hidden = frozenset() if self.syn_only else frozenset(targets(outline.count, self.nodes))
        return Effect(hides_close=hidden)


class DropFault(_ToPorts):
    """A firewall silently discards the packets (by default the SYNs to the store's port):
    the connect gets no answer at all."""

    kind: Literal["drop"]

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        return cls._to_store(outline, "drop")

    def inject(self, world: World, ctx: Context) -> Heal:
        label = "SYNs dropped" if self.syn_only else "packets dropped"
        rule = self._rule(ctx, "drop", label)
        return _apply(world, ctx, list(rule.sources), f"{self._detail()} dropped", [rule])


class RejectFault(_ToPorts):
    """The destination's firewall rejects the packets: a TCP reset (the connect is refused
    at once) or an ICMP host-unreachable (``answer = "unreachable"``)."""

    kind: Literal["reject"]
    answer: Literal["reset", "unreachable"] = "reset"

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        from hypothesis import strategies as st

        return cls._to_store(outline, "reject", answer=st.sampled_from(["reset", "unreachable"]))

    def inject(self, world: World, ctx: Context) -> Heal:
        if self.answer == "reset":
            rule = self._rule(ctx, "reject-reset", "connection attempts reset")
        else:
            rule = self._rule(ctx, "reject-unreachable", "packets answered host-unreachable")
        detail = f"{self._detail()} rejected ({self.answer})"
        return _apply(world, ctx, list(rule.sources), detail, [rule])


class PartitionFault(_Kernel):
    """No packet passes between ``nodes`` and ``others`` (default: every other node); with
    ``one_way``, only those from ``nodes`` to ``others`` are dropped."""

    kind: Literal["partition"]
    nodes: Nodes
    others: Nodes | None = None
    one_way: bool = False

    def check(self, index: int, whole: Whole) -> list[str]:
        side = set(targets(whole.count, self.nodes))
        if self.others is not None:
            both = sorted(side & set(targets(whole.count, self.others)))
            if both:
                return [
                    (
                        f"fault[{index}]: node(s) {shown(both)} are on both sides of the "
                        "partition; list each node in 'nodes' or in 'others', not both"
                    )
                ]
        if self.others is None and len(side) == whole.count:
            return [
                (
                    f"fault[{index}].nodes: every node is on one side, so nothing is cut off; "
                    "list the nodes of one side only"
                )
            ]
        return []

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """Node 0 or some workers cut off from every other node, both ways or one way."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import subset

        side = st.one_of(st.just([0]), subset(outline.workers))
        return cls._drawn(outline, "partition", {"nodes": side, "one_way": st.booleans()})

    def effect(self, outline: Outline) -> Effect:
        """Every close across the cut may go unseen."""
        side = targets(outline.count, self.nodes)
        if self.others is None:
            other = [n for n in range(outline.count) if n not in side]
        else:
            other = targets(outline.count, self.others)
        return Effect(hides_close=self._close_hidden(outline, [*side, *other]))

    def inject(self, world: World, ctx: Context) -> Heal:
        side = ctx.targets(self.nodes)
        if self.others is None:
            other = [n for n in ctx.targets("all") if n not in set(side)]
        else:
            other = ctx.targets(self.others)
        rules = [PacketRule(tuple(side), tuple(other), label="packets dropped (one way)")]
        if not self.one_way:
            rules = [
                PacketRule(tuple(side), tuple(other), label="packets dropped"),
                PacketRule(tuple(other), tuple(side), label="packets dropped"),
            ]
        arrow = "->" if self.one_way else "<->"
        detail = f"{shown(side)} {arrow} {shown(other)} cut"
        return _apply(world, ctx, sorted({*side, *other}), detail, rules)


class LossFault(_Kernel):
    """Each packet ``direction`` of ``nodes`` (``out``: from them, ``in``: to them,
    ``both``) is dropped with probability ``percent`` %, drawn by the kernel per packet.

    With ``both`` on some nodes, a packet between two of them is judged twice; on every
    node it is judged once.
    """

    kind: Literal["loss"]
    nodes: Nodes = "all"
    percent: float = Field(gt=0, le=100)
    direction: Direction = "both"

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """1 % up to half of the packets of every node or of some workers."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import subset

        nodes = st.one_of(st.just("all"), subset(outline.workers))
        keys = {
            "nodes": nodes,
            "percent": st.sampled_from([1, 5, 20, 50]),
            "direction": st.sampled_from(["both", "in", "out"]),
        }
        return cls._drawn(outline, "loss", keys)

    def effect(self, outline: Outline) -> Effect:
        return Effect(hides_close=self._close_hidden(outline, self.nodes))

    def inject(self, world: World, ctx: Context) -> Heal:
        chosen = tuple(ctx.targets(self.nodes))
        everyone = tuple(ctx.targets("all"))
        label = "packets lost"
        if len(chosen) == len(everyone):
            rules = [PacketRule(everyone, everyone, percent=self.percent, label=label)]
        else:
            rules = []
            if self.direction in ("out", "both"):
                rules.append(PacketRule(chosen, everyone, percent=self.percent, label=label))
            if self.direction in ("in", "both"):
                rules.append(PacketRule(everyone, chosen, percent=self.percent, label=label))
        detail = f"{self.percent:g} % of packets {self.direction}"
        return _apply(world, ctx, list(chosen), detail, rules)


class FilterFault(_Kernel):
    """Only ``ports`` of ``nodes`` can be reached: connection attempts to any other port of
    theirs are dropped (a host firewall that lets one service through)."""

    kind: Literal["filter"]
    nodes: Nodes = Field(default_factory=lambda: [0])
    ports: list[Port] = Field(min_length=1)

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """Node 0 or every node reachable on the store's port only, or on another port only
        (then nobody reaches the store)."""
        from hypothesis import strategies as st

        keys = {
            "nodes": st.sampled_from([[0], "all"]),
            "ports": st.sampled_from([["store"], [1], ["store", 1]]),
        }
        return cls._drawn(outline, "filter", keys)

    def effect(self, outline: Outline) -> Effect:
        """Harmless while the store's port stays open (the nodes connect to nothing else)."""
        return Effect(harmless="store" in self.ports)

    def inject(self, world: World, ctx: Context) -> Heal:
        chosen = ctx.targets(self.nodes)
        rule = PacketRule(
            sources=tuple(ctx.targets("all")),
            destinations=tuple(chosen),
            except_ports=_port_numbers(self.ports),
            syn_only=True,
            label="SYNs to other ports dropped",
        )
        idle = "no connection was attempted to another port of theirs"
        return _apply(world, ctx, chosen, f"only ports {shown(self.ports)} open", [rule], idle)


class BandwidthFault(_Kernel):
    """The ``nodes``' traffic (``direction``) is limited to ``rate_kbit`` kbit/s (``tbf``)."""

    kind: Literal["bandwidth"]
    nodes: Nodes = "others"
    rate_kbit: int = Field(ge=8)
    direction: Direction = "both"
    needs: ClassVar[frozenset[str]] = frozenset({BANDWIDTH})

    @classmethod
    def draw(cls, outline: Outline) -> SearchStrategy[dict[str, Any]] | None:
        """Some workers' links, or node 0's, narrowed to 8 kbit/s up to 1 Mbit/s."""
        from hypothesis import strategies as st

        from harness.scenario.faults.draws import links

        keys = {
            "nodes": st.one_of(links(outline), st.just([0])),
            "rate_kbit": st.sampled_from([8, 64, 1024]),
            "direction": st.sampled_from(["both", "in", "out"]),
        }
        return cls._drawn(outline, "bandwidth", keys)

    def effect(self, outline: Outline) -> Effect:
        return Effect(hides_close=self._close_hidden(outline, self.nodes))

    def inject(self, world: World, ctx: Context) -> Heal:
        chosen = ctx.targets(self.nodes)
        limit = world.limit_bandwidth(chosen, self.rate_kbit, self.direction)
        record = ctx.record(chosen, f"{self.rate_kbit} kbit/s {self.direction}")
        idle = "their traffic stayed within the rate (and its burst)"
        ctx.tally(lambda: _count(record, [limit], idle))
        return limit.lift
