"""Lay out one report's timeline: lanes, event markers, fault windows, time axis (pure).

:func:`layout` turns a :class:`~harness.run.model.Report` into plain shapes in SVG pixel
coordinates that the HTML template only has to write out. Two SVGs share one x scale: a
header (time axis and one row per fault) and the lanes (one per node, behind them the fault
windows shaded across the lanes they target).

Large runs stay legible: lanes get thinner as nodes grow, and with ``collapse=True``
consecutive nodes that look alike (same outcome, same kinds of events, same faults, same
verdict) share one lane showing, per event kind, the spread of times across its nodes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from harness.report.fold import (
    group_message,
    node_ranges,
    nodes_label,
    runs,
    same_words,
    short_ranges,
)
from harness.report.glyphs import (
    FAULT_COLORS,
    GLYPHS,
    OTHER_GLYPH,
    STATUS_COLORS,
    event_title,
    fault_color,
    marker,
)
from harness.report.shapes import Band, Block, FaultRow, Lane, Span, Tick, Timeline
from harness.run.model import FaultRecord, NodeEvent, NodeOutcome, Report

__all__ = [
    "FAULT_COLORS",
    "STATUS_COLORS",
    "Band",
    "Block",
    "FaultRow",
    "Lane",
    "Span",
    "Tick",
    "Timeline",
    "layout",
    "nice_ticks",
    "node_ranges",
]

#: maps seconds since the start to an x coordinate.
Scale = Callable[[float], float]

LABEL_W = 140
BADGE_W = 176
GAP = 12
#: A collapsed timeline has at most this many lanes.
MAX_LANES = 40
#: Lane height and font of the nodes of an expanded band.
MEMBER_H, MEMBER_FONT = 12.0, 9.0


def nice_ticks(t_max: float, target: int = 8) -> list[float]:
    """Round tick positions (1, 2 or 5 times a power of ten) from 0 to ``t_max``."""
    if t_max <= 0:
        return [0.0]
    raw = t_max / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    count = int(t_max / step + 1e-9)
    return [round(i * step, 10) for i in range(count + 1)]


def _tick_label(t: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{t:.{decimals}f} s"


def _signatures(
    o: NodeOutcome, faults: dict[int, tuple[int, ...]], bad: set[int]
) -> tuple[tuple[Any, ...], ...]:
    """What makes two nodes look alike, finest first: outcome, error, kinds of events,
    faults, verdict; then without the events; then outcome and verdict only."""
    kinds: list[str] = []
    for event in o.events:
        if not kinds or kinds[-1] != event.event:
            kinds.append(event.event)
    targeted, named = faults.get(o.node, ()), o.node in bad
    return (
        (o.status, o.error_class, tuple(kinds), targeted, named),
        (o.status, o.error_class, targeted, named),
        (o.status, named),
    )


def _groups(
    outcomes: Sequence[NodeOutcome], faults: Sequence[FaultRecord], bad: set[int], collapse: bool
) -> list[list[NodeOutcome]]:
    """One group per node, or (``collapse``) one per story, wherever its nodes are, in
    order of first node: at most :data:`MAX_LANES` groups (judged more coarsely if the
    finest look-alike makes more)."""
    ordered = sorted(outcomes, key=lambda o: o.node)
    if not collapse:
        return [[o] for o in ordered]
    targeted: dict[int, tuple[int, ...]] = {}
    for fault in faults:
        for node in fault.nodes:
            targeted[node] = (*targeted.get(node, ()), fault.index)
    signatures = [_signatures(o, targeted, bad) for o in ordered]
    groups: dict[tuple[Any, ...], list[NodeOutcome]] = {}
    for level in range(3):
        groups = {}
        for outcome, sig in zip(ordered, signatures, strict=True):
            groups.setdefault(sig[level], []).append(outcome)
        if len(groups) <= MAX_LANES:
            break
    return list(groups.values())


def _span_label(nodes: Sequence[int]) -> str:
    """``node 3``, ``nodes 1-191`` (every node from 1 to 191) or ``nodes 0…4095`` (some of
    them: the lane's title lists which, its badge says how many)."""
    if len(nodes) == 1:
        return f"node {nodes[0]}"
    if nodes[-1] - nodes[0] + 1 == len(nodes):
        return f"nodes {nodes[0]}\N{EN DASH}{nodes[-1]}"
    return f"nodes {nodes[0]}\N{HORIZONTAL ELLIPSIS}{nodes[-1]}"


def _lane_sizes(lanes: int) -> tuple[float, float]:
    for limit, height, font in ((8, 30, 12), (16, 24, 12), (32, 18, 11), (64, 13, 10)):
        if lanes <= limit:
            return height, font
    return 12, 9


def _fired(report: Report) -> list[FaultRecord]:
    """The faults drawn: a fault that never fired has no time (the warnings name it)."""
    return [f for f in report.faults if f.fired]


def _extent(report: Report) -> float:
    times = [report.duration]
    for o in report.outcomes:
        times += [e.t for e in o.events]
        times += [t for t in (o.started, o.finished) if t is not None]
    times += [f.end if f.end is not None else f.start for f in _fired(report)]
    return max(0.1, max(times) * 1.03)


def layout(report: Report, width: float = 1120, collapse: bool = False) -> Timeline:
    """Lay out ``report``'s timeline ``width`` pixels wide.

    Args:
        report: the run to draw.
        width: total SVG width in pixels (labels left, outcome badges right).
        collapse: merge consecutive look-alike nodes into one lane.
    """
    t_max = _extent(report)
    plot_x = LABEL_W
    plot_w = width - LABEL_W - BADGE_W - GAP

    def x_of(t: float) -> float:
        return plot_x + max(0.0, min(t, t_max)) / t_max * plot_w

    bad = {n for v in report.problems for n in v.nodes}
    groups = _groups(report.outcomes, _fired(report), bad, collapse)
    lane_h, font = _lane_sizes(len(groups))
    lanes = [
        _lane(group, i * lane_h, lane_h, bad, x_of, report.duration)
        for i, group in enumerate(groups)
    ]
    for lane, group in zip(lanes, groups, strict=True):
        if len(group) > 1:
            lane.members = _members(group, report, bad, x_of, t_max)
    ticks_t = nice_ticks(t_max)
    step = ticks_t[1] - ticks_t[0] if len(ticks_t) > 1 else t_max
    ticks = [Tick(x_of(t), _tick_label(t, step)) for t in ticks_t]
    axis_h, row_h = 22.0, 18.0
    rows: list[FaultRow] = []
    for i, fault in enumerate(_fired(report)):
        y = axis_h + i * row_h
        x0 = x_of(fault.start)
        x1 = x_of(fault.end if fault.end is not None else t_max)
        color = fault_color(fault.kind)
        bar = Span(x0, y + 2, max(x1 - x0, 2.0), row_h - 4, color, _fault_title(fault))
        said = f"nodes {short_ranges(fault.nodes)}"
        said = f"{said} · {fault.detail}" if fault.detail else said
        said = f"{said} · {'did not act' if fault.flagged else fault.effects}"
        # A hollow (idle) bar has no fill to carry white text: keep the text outside it.
        text, text_x, inside = _fault_text(said, bar, plot_x + plot_w, not fault.flagged)
        rows.append(
            FaultRow(
                y=y,
                label=f"{'⚠ ' if fault.flagged else ''}fault {fault.index} · {fault.kind}",
                text=text,
                color=color,
                bar=bar,
                open_end=fault.end is None,
                instant=fault.end is not None and x1 - x0 < 2.0,
                text_x=text_x,
                text_inside=inside,
                idle=fault.flagged,
            )
        )
    bands = _bands(_fired(report), lanes, x_of, t_max)
    header_h = axis_h + len(rows) * row_h + (6 if rows else 0)
    return Timeline(
        width=width,
        plot_x=plot_x,
        plot_w=plot_w,
        badge_x=plot_x + plot_w + GAP,
        badge_w=BADGE_W - 6,
        t_max=t_max,
        lane_h=lane_h,
        font=font,
        header_h=header_h,
        lanes_h=len(lanes) * lane_h,
        ticks=ticks,
        fault_rows=rows,
        lanes=lanes,
        bands=bands,
        collapsed=collapse and len(lanes) < len(report.outcomes),
    )


def _fault_text(
    text: str, bar: Span, right: float, inside_ok: bool = True
) -> tuple[str, float, bool]:
    """Where a fault's detail fits: inside its bar, after it, or inside and shortened
    (after it, or shortened there, only when ``inside_ok`` is false)."""
    char = 6.0
    need = len(text) * char + 10
    if not inside_ok:
        room = int((right - (bar.x + bar.w) - 10) / char)
        if room < 4:
            return "", bar.x, False
        return f"{text[: room - 1]}…" if len(text) > room else text, bar.x + bar.w + 5, False
    if bar.w >= need:
        return text, bar.x + 5, True
    if right - (bar.x + bar.w) >= need:
        return text, bar.x + bar.w + 5, False
    room = int((bar.w - 10) / char)
    if room >= 4:
        return f"{text[: room - 1]}…" if len(text) > room else text, bar.x + 5, True
    return "", bar.x, False


def _fault_title(fault: FaultRecord) -> str:
    end = "until the end of the run" if fault.end is None else f"until {fault.end:.3f} s"
    head = f"fault {fault.index}: {fault.kind} on node(s) {short_ranges(fault.nodes)}"
    detail = f"\n{fault.detail}" if fault.detail else ""
    did = f"\n{'⚠ ' if fault.flagged else 'acted: ' if fault.acted else ''}{fault.effects}"
    return f"{head}\nfrom {fault.start:.3f} s {end}{detail}{did}"


def _bands(
    faults: Sequence[FaultRecord],
    lanes: Sequence[Lane],
    x_of: Scale,
    t_max: float,
) -> list[Band]:
    bands: list[Band] = []
    for fault in faults:
        targets = set(fault.nodes)
        hit = [i for i, lane in enumerate(lanes) if targets & set(lane.nodes)]
        x0 = x_of(fault.start)
        x1 = x_of(fault.end if fault.end is not None else t_max)
        color = fault_color(fault.kind)
        for first, last in runs(hit):
            top = lanes[first].y
            bottom = lanes[last].y + lanes[last].h
            bands.append(
                Band(
                    x0,
                    top,
                    max(x1 - x0, 2.0),
                    bottom - top,
                    color,
                    _fault_title(fault),
                    open_end=fault.end is None,
                    instant=x1 - x0 < 2.0,
                )
            )
    return bands


def _node_detail(o: NodeOutcome) -> str:
    """A node's rank, placement and every event's time, for its compact lane's title."""
    facts = [f"rank {o.rank}" if o.rank is not None else "no rank"]
    if o.placement:
        facts.append(o.placement)
    events = []
    for e in o.events:
        error = e.fields.get("error")
        events.append(f"{e.event} {e.t:.3f}" + (f" ({error})" if error else ""))
    return f"\n{' · '.join(facts)}\n{' · '.join(events)}" if events else f"\n{' · '.join(facts)}"


def _members(
    group: Sequence[NodeOutcome], report: Report, bad: set[int], x_of: Scale, t_max: float
) -> Block:
    """The nodes of a band, each in its own compact lane."""
    lanes = []
    for i, o in enumerate(group):
        # Drawn from y = 0 (the template moves each lane down): shorter coordinates.
        lane = _lane([o], 0.0, MEMBER_H, bad, x_of, report.duration, compact=True)
        if i and o.message and group[0].message and same_words(o.message, group[0].message):
            # the band says it already (its numbers as ranges)
            lane.title = lane.title.replace(f"\n{o.error_class}: {o.message}", "", 1)
        lane.y = i * MEMBER_H
        lanes.append(lane)
    bands = _bands(_fired(report), lanes, x_of, t_max)
    return Block(lanes, bands, len(lanes) * MEMBER_H, MEMBER_FONT)


def _first(outcome: NodeOutcome, name: str) -> float | None:
    return next((e.t for e in outcome.events if e.event == name), None)


def _lane(
    group: Sequence[NodeOutcome],
    y: float,
    h: float,
    bad: set[int],
    x_of: Scale,
    run_end: float,
    compact: bool = False,
) -> Lane:
    """The lane of ``group`` (one node, or look-alike nodes drawn as one band). A
    ``compact`` lane (a node inside an expanded band) carries one hover title, with every
    event's time, instead of one per marker."""
    first = group[0]
    nodes = tuple(o.node for o in group)
    mid = y + h / 2
    size = max(3.0, min(7.0, h * 0.3))
    color = STATUS_COLORS.get(first.status, "#64748b")
    elapsed = [o.elapsed for o in group if o.elapsed is not None]
    when = f" {statistics.median(elapsed):.1f} s" if elapsed else ""
    badge = (
        f"{first.status}{when}"
        if len(group) == 1
        else f"{first.status} \N{MULTIPLICATION SIGN}{len(group)}"
    )
    message = first.message if len(group) == 1 else group_message(group)
    detail = f"\n{first.error_class}: {message}" if message else ""
    if compact:
        detail += _node_detail(first)
    elif len(group) > 1:
        detail += "\nclick to list each node's own lane"
    lane = Lane(
        y=y,
        h=h,
        label=_span_label(nodes),
        nodes=nodes,
        status=first.status,
        badge=badge,
        color=color,
        violated=any(n in bad for n in nodes),
        title=f"{nodes_label(nodes)}: {first.status}{when}{detail}",
    )
    starts = [o.started for o in group if o.started is not None]
    if starts:
        # Alive from its first "started" event; launching from its last launch until it
        # began (its outcome says when: a restart's launch lies over its lifeline).
        launched = min(starts)
        running = [t for t in (_first(o, "started") for o in group) if t is not None]
        began = min(running) if running else launched
        ends = [o.finished if o.finished is not None else run_end for o in group]
        x0, x1 = x_of(began), x_of(max(ends))
        lane.lifeline = Span(x0, mid - h * 0.14, max(x1 - x0, 1.0), h * 0.28, color)
        spawn = x_of(launched)
        last = [o.began for o in group if o.began is not None and o.began >= launched]
        ready = x_of(min(last)) if last else x0
        if ready - spawn >= 2:
            title = "" if compact else f"{lane.label}: launching from {launched:.3f} s"
            lane.launch = Span(spawn, mid - 0.5, ready - spawn, 1.0, "#94a3b8", title)
    if len(group) == 1:
        for event in first.events:
            title = "" if compact else event_title(event)
            lane.markers.append(marker(event, x_of(event.t), mid, size, title))
        return lane
    by_kind: dict[str, list[NodeEvent]] = {}
    for o in group:
        for event in o.events:
            by_kind.setdefault(event.event, []).append(event)
    for kind, events in by_kind.items():
        times = sorted(e.t for e in events)
        median = statistics.median(times)
        title = (
            f"{kind}: {len(events)} event(s) from {len(group)} nodes\n"
            f"first {times[0]:.3f} s · median {median:.3f} s · last {times[-1]:.3f} s"
        )
        _, tone = GLYPHS.get(kind, OTHER_GLYPH)
        x0, x1 = x_of(times[0]), x_of(times[-1])
        if x1 - x0 >= 2:
            lane.spreads.append(Span(x0, mid - 1, x1 - x0, 2, tone, title))
        sample = min(events, key=lambda e: abs(e.t - median))
        lane.markers.append(marker(sample, x_of(median), mid, size, title))
    return lane
