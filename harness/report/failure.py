"""A failed run as plain text for a test runner (the pytest plugin's failure report)."""

from __future__ import annotations

from harness.report.fold import (
    FOLD_ABOVE,
    fold_lines,
    outcome_folds,
    shutdown_note,
    violation_folds,
)
from harness.report.text import fault_line, folded_output_lines, output_lines
from harness.run.model import NodeOutcome, Report

__all__ = ["failure_text"]


def failure_text(report: Report) -> str:
    """A failed run as the item shows it: checks, node outcomes, faults, seed, replay.
    Beyond 64 nodes, nodes that say the same thing share a line (``harness.report.fold``)
    and only a bounded number of distinct lines and outputs is shown."""

    def node_line(o: NodeOutcome) -> str:
        took = f" after {o.elapsed:.2f} s" if o.elapsed is not None else ""
        rank = f" rank {o.rank}" if o.rank is not None else ""
        why = f": {o.error_class or 'message'}: {o.message}" if o.message else ""
        return f"node {o.node}: {o.status}{rank}{took}{why}{shutdown_note(o)}"

    many = len(report.outcomes) > FOLD_ABOVE
    lines = [f"scenario {report.scenario.name} failed ({report.scenario.nodes} nodes)"]
    checks = [f"[{v.check}] {v.message}" for v in report.problems]
    if many:
        checks = fold_lines(violation_folds(report.problems), 50)
    lines += ["failed checks:", *(f"  {line}" for line in checks)]
    if report.error is not None:
        lines.append(report.error)
    lines.append("nodes:")
    if many:
        lines += [f"  {x}" for x in fold_lines(outcome_folds(report.outcomes, node_line), 50)]
    else:
        lines += [f"  {node_line(o)}" for o in report.outcomes]
    lines += [f"  {fault_line(f)}" for f in report.faults]
    flagged = {n for v in report.problems for n in v.nodes}
    if many:
        named = [o for o in report.outcomes if o.node in flagged]
        lines += [f"  {line}" for line in folded_output_lines(named, flagged, 8)]
    else:
        for o in report.outcomes:
            if o.node in flagged:
                lines += [f"  {line}" for line in output_lines(o)]
    lines += [f"seed: {report.seed}", f"replay: {report.replay_command}"]
    return "\n".join(lines)
