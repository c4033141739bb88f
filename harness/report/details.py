"""What every node of a run said and did, as plain lines (``harness run -v``, the pytest
plugin's report section): shown for passing runs too, where the summary shows only counts.

:func:`detail_lines` gives, for one report: what each fault did, how the nodes ended (nodes
that say the same thing share a line beyond :data:`~harness.report.fold.FOLD_ABOVE` nodes),
where they ran, then each node's events in order (a run of the same event, such as nine
refused connection attempts, is one line) with the message an event carries, and what the
node wrote. Beyond :data:`EVENTS_SHOWN` nodes, the events of the first ones only (the HTML
report has every node's).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.fold import FOLD_ABOVE, fold_lines, outcome_folds, placement_line
from harness.report.text import fault_line, folded_output_lines, outcome_line, part_lines
from harness.run.model import NodeEvent, NodeOutcome, Report

__all__ = ["EVENTS_SHOWN", "detail_lines", "event_lines"]

#: The nodes whose events are listed one by one; beyond, one line says how many are not.
EVENTS_SHOWN = 16

#: Event fields that carry a message worth reading, in order of preference.
_SAID = ("message", "error")


def _said(event: NodeEvent) -> str:
    for key in _SAID:
        value = event.fields.get(key)
        if value:
            return str(value)
    return ""


def event_lines(outcome: NodeOutcome) -> list[str]:
    """``node 1 events:`` then one line per event, ``  2.563 s connected``; consecutive
    events of one name form one line, ``  0.010-2.026 s connect_attempt x9: <the last
    one's message>``."""
    if not outcome.events:
        return []
    runs: list[list[NodeEvent]] = []
    for event in outcome.events:
        if runs and runs[-1][0].event == event.event:
            runs[-1].append(event)
        else:
            runs.append([event])
    lines = [f"node {outcome.node} events:"]
    for run in runs:
        first, last = run[0], run[-1]
        when = f"{first.t:.3f} s" if len(run) == 1 else f"{first.t:.3f}-{last.t:.3f} s"
        name = first.event if len(run) == 1 else f"{first.event} x{len(run)}"
        said = _said(last)
        lines.append(f"  {when} {name}" + (f": {said}" if said else ""))
    return lines


def detail_lines(report: Report) -> list[str]:
    """Faults, node outcomes (and a job node's parts), placement, each node's events and
    output (see the module)."""
    lines = [fault_line(f) for f in report.faults]
    many = len(report.outcomes) > FOLD_ABOVE
    if many:
        lines += fold_lines(outcome_folds(report.outcomes, outcome_line))
    else:
        lines += [outcome_line(o) for o in report.outcomes]
    lines += part_lines(report.outcomes, EVENTS_SHOWN)
    placement = placement_line(report.outcomes)
    if placement is not None:
        lines.append(f"placement: {placement}")
    ordered: Sequence[NodeOutcome] = sorted(report.outcomes, key=lambda o: o.node)
    for outcome in ordered[:EVENTS_SHOWN]:
        lines += event_lines(outcome)
    hidden = sum(bool(o.events) for o in ordered[EVENTS_SHOWN:])
    if hidden:
        lines.append(f"events of {hidden} more node(s) not shown (harness run --html has them)")
    lines += folded_output_lines(ordered, set(), EVENTS_SHOWN)
    return lines
