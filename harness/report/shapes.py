"""The shapes a timeline is drawn with, in SVG pixel coordinates (plain data).

:func:`harness.report.timeline.layout` computes them; the HTML template writes them out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.report.glyphs import Marker

__all__ = ["Band", "Block", "FaultRow", "Lane", "Span", "Tick", "Timeline"]


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Span:
    """A horizontal bar (lifeline, spread of an event kind, fault bar)."""

    x: float
    y: float
    w: float
    h: float
    color: str
    title: str = ""


@dataclass(frozen=True)
class Band:
    """A fault window shaded across consecutive lanes."""

    x: float
    y: float
    w: float
    h: float
    color: str
    title: str
    open_end: bool
    instant: bool


@dataclass(frozen=True)
class FaultRow:
    """One fault in the header: its label, its window as a bar, and where its text goes."""

    y: float
    label: str
    text: str
    color: str
    bar: Span
    open_end: bool
    instant: bool
    text_x: float
    text_inside: bool
    idle: bool = False


@dataclass
class Lane:
    y: float
    h: float
    label: str
    nodes: tuple[int, ...]
    status: str
    badge: str
    color: str
    violated: bool
    title: str
    lifeline: Span | None = None
    launch: Span | None = None
    markers: list[Marker] = field(default_factory=list)
    spreads: list[Span] = field(default_factory=list)
    #: A band of look-alike nodes: each of its nodes in its own lane, shown on demand.
    members: Block | None = None


@dataclass
class Block:
    """The lanes of a band's nodes with the fault windows across them. Each lane's shapes
    are drawn from y = 0 (its ``y`` says where the lane goes); the bands span the block."""

    lanes: list[Lane]
    bands: list[Band]
    h: float
    font: float


@dataclass
class Timeline:
    width: float
    plot_x: float
    plot_w: float
    badge_x: float
    badge_w: float
    t_max: float
    lane_h: float
    font: float
    header_h: float
    lanes_h: float
    ticks: list[Tick]
    fault_rows: list[FaultRow]
    lanes: list[Lane]
    bands: list[Band]
    collapsed: bool
