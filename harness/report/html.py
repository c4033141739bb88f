"""The self-contained HTML report: a summary, then one section per scenario with its timeline.

Everything is inline (CSS and SVG; no script, font or CDN), so the file can be archived as a
CI artifact and opened anywhere. The page is rendered with jinja2 from the package resource
``harness/report/templates/report.html.j2``; the geometry comes from :mod:`harness.report.timeline`.

Runs of more than :data:`LANES_EXPANDED` nodes show collapsed lanes: nodes with the same
story (outcome, kinds of events, faults, verdict) share one band, wherever they are, and
each band is a ``<details>`` element whose body has each of its nodes' own (compact) lane,
so every node stays one click away while a 4096-node page stays a few MB. Beyond
:data:`~harness.report.fold.FOLD_ABOVE` nodes the node table has one row per group of
nodes that ended alike.

Each scenario also lists its faults with what each did; a fault that did not act is
flagged (a warning box, a hollow dashed bar on the timeline, a tag in the summary), which
is informational: it does not fail the run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2

from harness.report.fold import (
    FOLD_ABOVE,
    elapsed_range,
    group_message,
    nodes_label,
    outcome_groups,
    placement_line,
    short_ranges,
    shutdown_note,
    violation_folds,
)
from harness.report.glyphs import (
    IDLE_COLOR,
    STATUS_COLORS,
    Marker,
    fault_color,
    fault_legend,
    legend,
)
from harness.report.text import outcome_counts, start_text, verdict
from harness.report.timeline import Timeline, layout
from harness.run.model import FaultRecord, NodeOutcome, Report, Violation

__all__ = ["LANES_EXPANDED", "render_html", "write_html"]

#: Up to this many nodes every node has its own lane; beyond it lanes collapse first.
LANES_EXPANDED = 64


@dataclass(frozen=True)
class _Count:
    status: str
    count: int
    color: str
    share: float


@dataclass(frozen=True)
class _Row:
    node: str
    status: str
    color: str
    rank: str
    world_size: str
    elapsed: str
    error_class: str
    message: str
    flagged: bool


@dataclass(frozen=True)
class _Part:
    node: int
    part: str
    status: str
    color: str
    exitcode: str
    rank: str
    restarts: str
    result: str
    error_class: str
    message: str


@dataclass(frozen=True)
class _Fault:
    index: int
    kind: str
    color: str
    nodes: str
    window: str
    detail: str
    effects: str
    idle: bool


@dataclass(frozen=True)
class _Section:
    anchor: str
    name: str
    verdict: str
    description: str
    sources: list[str]
    field_failure: str
    path: str
    seed: int
    nodes: int
    duration: str
    start: str
    replay: str
    violations: list[tuple[str, str, str]]
    known: list[tuple[str, str, str]]
    backend: str
    skipped: str
    error: str
    counts: list[_Count]
    timeline: Timeline | None
    placement: str
    rows: list[_Row]
    folded: bool
    open_rows: bool
    faults: list[_Fault]
    idle: list[_Fault]
    parts: list[_Part]


def _anchor(index: int, name: str) -> str:
    return f"s{index}-{re.sub(r'[^a-z0-9-]+', '-', name.lower())}"


def _counts(report: Report) -> list[_Count]:
    total = max(1, len(report.outcomes))
    return [
        _Count(status, count, STATUS_COLORS.get(status, "#64748b"), 100 * count / total)
        for status, count in outcome_counts(report)
    ]


def _opt(value: object) -> str:
    return "" if value is None else str(value)


def _row(outcome: NodeOutcome, flagged: set[int]) -> _Row:
    elapsed = outcome.elapsed
    return _Row(
        node=str(outcome.node),
        status=outcome.status,
        color=STATUS_COLORS.get(outcome.status, "#64748b"),
        rank=_opt(outcome.rank),
        world_size=_opt(outcome.world_size),
        elapsed="" if elapsed is None else f"{elapsed:.3f} s",
        error_class=(outcome.error_class or "").rsplit(".", 1)[-1],
        message=((outcome.message or "") + shutdown_note(outcome)).strip(),
        flagged=outcome.node in flagged,
    )


def _folded_row(group: list[NodeOutcome], flagged: set[int]) -> _Row:
    """Nodes that ended alike, as one row (``node N`` in the message stands for each)."""
    if len(group) == 1:
        return _row(group[0], flagged)
    first = group[0]
    rank = "" if first.rank is None else "= node" if first.rank == first.node else str(first.rank)
    return _Row(
        node=nodes_label([o.node for o in group]).removeprefix("nodes "),
        status=first.status,
        color=STATUS_COLORS.get(first.status, "#64748b"),
        rank=rank,
        world_size=_opt(first.world_size),
        elapsed=elapsed_range(group),
        error_class=(first.error_class or "").rsplit(".", 1)[-1],
        message=(group_message(group) + shutdown_note(first)).strip(),
        flagged=any(o.node in flagged for o in group),
    )


def _rows(report: Report, flagged: set[int]) -> list[_Row]:
    """One row per node, or beyond :data:`~harness.report.fold.FOLD_ABOVE` nodes one per
    group of nodes that ended alike."""
    if len(report.outcomes) <= FOLD_ABOVE:
        return [_row(o, flagged) for o in sorted(report.outcomes, key=lambda o: o.node)]
    return [_folded_row(group, flagged) for group in outcome_groups(report.outcomes)]


def _parts(report: Report) -> list[_Part]:
    """Every part of every job node, in node order (none: not a job)."""
    return [
        _Part(
            node=p.node,
            part=p.part,
            status=p.status,
            color=STATUS_COLORS.get(p.status, "#64748b"),
            exitcode=_opt(p.exitcode),
            rank=_opt(p.rank) if p.rank is None else f"{p.rank} of {p.world_size}",
            restarts=_opt(p.restarts)
            + (f" ({p.membership_restarts} membership)" if p.membership_restarts else ""),
            result=_opt(p.result) if p.result is None else f"{p.result:g}",
            error_class=p.error_class or "",
            message=p.message or "",
        )
        for o in sorted(report.outcomes, key=lambda o: o.node)
        for p in o.parts
    ]


def _fault(fault: FaultRecord) -> _Fault:
    end = "the end" if fault.end is None else f"{fault.end:.2f} s"
    return _Fault(
        index=fault.index,
        kind=fault.kind,
        color=fault_color(fault.kind),
        nodes=short_ranges(fault.nodes),
        window=f"{fault.start:.2f} s to {end}" if fault.fired else "",  # detail: when due
        detail=fault.detail,
        effects=fault.effects,
        idle=fault.flagged,
    )


def _violations(violations: list[Violation], many: bool) -> list[tuple[str, str, str]]:
    """``(check, message, nodes)``; with ``many``, violations of one node each that read the
    same but for its number share an item (``node N`` standing for each)."""
    found = []
    for fold in violation_folds(violations, many):
        check, _, message = fold.text.partition("] ")
        nodes = short_ranges(fold.nodes) if fold.nodes else ""
        if fold.count > 1:
            nodes = f"{nodes} ({len(fold.nodes)})" if nodes.count(",") else nodes
        found.append((check.removeprefix("["), message, nodes))
    return found


def _section(index: int, report: Report, width: float) -> _Section:
    sc = report.scenario
    flagged = {n for v in report.problems for n in v.nodes}
    many = len(report.outcomes) > FOLD_ABOVE
    timeline = None
    if report.outcomes:
        timeline = layout(report, width, collapse=len(report.outcomes) > LANES_EXPANDED)
    return _Section(
        anchor=_anchor(index, sc.name),
        name=sc.name,
        verdict=verdict(report),
        description=re.sub(r"(?<!\n)\n(?!\n)", " ", sc.description.strip()),
        sources=list(sc.sources),
        field_failure=sc.field_failure or "",
        path=sc.path or "",
        seed=report.seed,
        nodes=sc.nodes,
        duration=f"{report.duration:.2f} s",
        start=start_text(report) or "",
        replay=report.replay_command,
        violations=_violations(report.problems, many),
        known=_violations([v for v in report.violations if v.known], many),
        backend=sc.backend,
        skipped=report.skip_reason or "",
        error=report.error or "",
        counts=_counts(report),
        timeline=timeline,
        placement=placement_line(report.outcomes) or "",
        rows=_rows(report, flagged),
        folded=many,
        open_rows=not report.passed and len(report.outcomes) <= 32,
        faults=[_fault(f) for f in report.faults],
        idle=[_fault(f) for f in report.unexpectedly_idle],
        parts=_parts(report),
    )


def _px(value: float) -> str:
    """A coordinate with at most one decimal (keeps a 256-node SVG small)."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["px"] = _px
    return env


def render_html(
    reports: Sequence[Report],
    title: str = "harness report",
    generated: str | None = None,
    width: float = 1120,
) -> str:
    """The report page for ``reports``, as one self-contained HTML document.

    Args:
        reports: the runs, in the order they are shown.
        title: the page title.
        generated: when the run happened (shown verbatim), e.g. an ISO 8601 timestamp.
        width: the timelines' width in pixels.

    Raises:
        jinja2.TemplateError: the packaged template is missing or broken (an install bug).
    """
    sections = [_section(i, r, width) for i, r in enumerate(reports)]
    glyphs: list[tuple[str, Marker]] = legend()
    errors = sum(r.error is not None for r in reports)
    failed = sum(not r.passed for r in reports) - errors
    skipped = sum(r.skipped is not None for r in reports)
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            generated=generated or "",
            sections=sections,
            passed=len(reports) - failed - errors - skipped,
            failed=failed,
            errors=errors,
            skipped=skipped,
            total=len(reports),
            wall=f"{sum(r.duration for r in reports):.1f} s",
            glyphs=glyphs,
            status_colors=STATUS_COLORS,
            fault_colors=fault_legend(),
            idle_color=IDLE_COLOR,
            width=width,
        )
    )


def write_html(
    reports: Sequence[Report],
    path: str | Path,
    title: str = "harness report",
    generated: str | None = None,
) -> None:
    """Write :func:`render_html` to ``path`` (UTF-8).

    Raises:
        OSError: the file cannot be written.
        jinja2.TemplateError: the packaged template is missing or broken.
    """
    Path(path).write_text(render_html(reports, title, generated), encoding="utf-8")
