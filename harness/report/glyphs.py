"""How the timeline draws things: outcome and fault colours, event glyphs (pure).

A glyph is an SVG path centred on a point; :func:`marker` picks the glyph and colour of a
node event, :func:`legend` lists them all for the page's legend.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from harness.run.model import NodeEvent
from harness.scenario.faults.registry import FAULTS

__all__ = [
    "FAULT_COLORS",
    "GLYPHS",
    "IDLE_COLOR",
    "OTHER_GLYPH",
    "STATUS_COLORS",
    "Marker",
    "event_title",
    "fault_color",
    "fault_legend",
    "legend",
    "marker",
]

STATUS_COLORS = {
    "ok": "#16a34a",
    "timeout": "#d97706",
    "connection_error": "#2563eb",
    "state_error": "#9333ea",
    "closed": "#0891b2",
    "error": "#dc2626",
    "killed": "#991b1b",
    "hung": "#c026d3",
    "absent": "#94a3b8",
}
FAULT_COLORS = {
    "toxic": "#f59e0b",
    "link_down": "#ef4444",
    "dns": "#8b5cf6",
    "store_op": "#14b8a6",
    "pause": "#3b82f6",
    "kill": "#7f1d1d",
    "restart": "#db2777",
    "squatter": "#a16207",
    "late_start": "#6366f1",
    "absent": "#64748b",
    # the netns world's kernel faults
    "drop": "#0f766e",
    "reject": "#be123c",
    "partition": "#c2410c",
    "loss": "#ca8a04",
    "filter": "#4d7c0f",
    "bandwidth": "#0369a1",
}
#: The colours of fault kinds :data:`FAULT_COLORS` does not name (a kind registered later,
#: a user's own): one picked by the kind's name, the same on every page.
_SPARE_COLORS = ("#0e7490", "#9d174d", "#4338ca", "#854d0e", "#166534", "#6b21a8")
#: the outline of a fault that did not act (its bar is drawn hollow in this colour).
IDLE_COLOR = "#b45309"
#: event name -> (glyph, colour); events not listed are drawn as small grey dots.
GLYPHS = {
    "started": ("bar", "#475569"),
    "server_listening": ("square", "#0284c7"),
    "connect_attempt": ("ring", "#94a3b8"),
    "connected": ("dot", "#2563eb"),
    "joined": ("diamond", "#7c3aed"),
    "complete": ("triangle", "#16a34a"),
    "returned": ("square", "#15803d"),
    "failed": ("cross", "#dc2626"),
}
#: the glyph of any event not in :data:`GLYPHS`.
OTHER_GLYPH = ("dot", "#cbd5e1")
_RETRY_COLOR = "#f97316"  # a connect attempt that failed


def fault_color(kind: str) -> str:
    """The colour of fault kind ``kind`` on the timeline and in the legend."""
    return FAULT_COLORS.get(kind) or _SPARE_COLORS[zlib.crc32(kind.encode()) % len(_SPARE_COLORS)]


def fault_legend() -> dict[str, str]:
    """Every registered fault kind (the registry, not a list kept here) and its colour."""
    return {kind: fault_color(kind) for kind in FAULTS.kinds()}


@dataclass(frozen=True)
class Marker:
    """One glyph: an SVG path ``d`` with its fill and stroke, and a hover title."""

    d: str
    fill: str
    stroke: str
    title: str


def _fmt(value: Any) -> str:
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return text if len(text) <= 240 else f"{text[:237]}..."


def _glyph(shape: str, x: float, y: float, s: float) -> str:
    """The SVG path of a glyph of half-size ``s`` centred on ``(x, y)``."""
    if shape == "bar":
        return f"M{x - 1:.1f} {y - s:.1f}h2v{2 * s:.1f}h-2z"
    if shape in ("dot", "ring"):
        r = s * 0.7
        arc = f"a{r:.1f} {r:.1f} 0 1 0"
        return f"M{x - r:.1f} {y:.1f}{arc} {2 * r:.1f} 0{arc} {-2 * r:.1f} 0z"
    if shape == "diamond":
        return f"M{x:.1f} {y - s:.1f}L{x + s:.1f} {y:.1f}L{x:.1f} {y + s:.1f}L{x - s:.1f} {y:.1f}z"
    if shape == "triangle":
        return f"M{x:.1f} {y - s:.1f}L{x + s:.1f} {y + 0.8 * s:.1f}L{x - s:.1f} {y + 0.8 * s:.1f}z"
    if shape == "square":
        h = s * 0.7
        return f"M{x - h:.1f} {y - h:.1f}h{2 * h:.1f}v{2 * h:.1f}h{-2 * h:.1f}z"
    # cross
    h = s * 0.75
    down = f"M{x - h:.1f} {y - h:.1f}L{x + h:.1f} {y + h:.1f}"
    return f"{down}M{x + h:.1f} {y - h:.1f}L{x - h:.1f} {y + h:.1f}"


def marker(event: NodeEvent, x: float, y: float, s: float, title: str) -> Marker:
    """The glyph of ``event`` at ``(x, y)``, half-size ``s``, with hover text ``title``."""
    shape, color = GLYPHS.get(event.event, OTHER_GLYPH)
    if event.event == "connect_attempt" and event.fields.get("error"):
        color = _RETRY_COLOR
    if shape == "ring":
        return Marker(_glyph(shape, x, y, s), "#ffffff", color, title)
    if shape == "cross":
        return Marker(_glyph(shape, x, y, s), "none", color, title)
    small = s * 0.6 if event.event not in GLYPHS else s
    return Marker(_glyph(shape, x, y, small), color, "none", title)


def event_title(event: NodeEvent) -> str:
    """Hover text of an event: node, name, time, then its fields."""
    fields = " · ".join(f"{k}={_fmt(v)}" for k, v in event.fields.items() if v is not None)
    head = f"node {event.node} · {event.event} at {event.t:.3f} s"
    return f"{head}\n{fields}" if fields else head


def legend() -> list[tuple[str, Marker]]:
    """``(label, glyph)`` for the events the timeline draws, for a legend."""
    shown = [*GLYPHS, "connect_attempt_failed", "other"]
    found: list[tuple[str, Marker]] = []
    for name in shown:
        if name == "connect_attempt_failed":
            event = NodeEvent(0, 0.0, "connect_attempt", {"error": "refused"})
            label = "connect attempt failed"
        else:
            event = NodeEvent(0, 0.0, name)
            label = name.replace("_", " ")
        found.append((label, marker(event, 8, 8, 6, label)))
    return found
