"""Reports in plain words: verdicts, one-line results, totals, what each fault did.

Pure functions of :class:`~harness.run.model.Report` objects (no clock reads), shared by the
console summary (:mod:`harness.report.console`), the JUnit XML (:mod:`harness.report.junit`),
the HTML report and the pytest plugin.

* :func:`result_line` — one plain line per finished scenario (progress in CI logs).
* :func:`fault_line`, :func:`idle_fault_lines` — what each fault did; a warning per fault
  that did not act (informational: not a failure).
* :func:`outcome_line`, :func:`output_lines`, :func:`folded_output_lines` — a node's
  outcome and the tail of its output; identical tails of many nodes once.
* :func:`part_line`, :func:`part_lines` — each part of a job node (agent, workers): its
  outcome, exit code, RANK, restarts, result and message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.report.fold import nodes_label, short_ranges, shutdown_note
from harness.run.model import FaultRecord, NodeOutcome, PartOutcome, Report
from harness.scenario.model import OUTCOMES

__all__ = [
    "INTERRUPTED",
    "duration",
    "fault_line",
    "folded_output_lines",
    "idle_fault_lines",
    "outcome_counts",
    "outcome_line",
    "output_lines",
    "part_line",
    "part_lines",
    "result_line",
    "start_text",
    "totals_line",
    "verdict",
]


def outcome_counts(report: Report) -> list[tuple[str, int]]:
    """``(status, how many nodes)`` in :data:`~harness.scenario.model.OUTCOMES` order,
    non-zero only."""
    counts = Counter(o.status for o in report.outcomes)
    known = [(status, counts[status]) for status in OUTCOMES if counts[status]]
    unknown = sorted((s, n) for s, n in counts.items() if s not in OUTCOMES)
    return known + unknown


#: What an interrupted scenario shows in place of a verdict's reasons.
INTERRUPTED = "interrupted (Ctrl-C) before it ended: its nodes were killed, nothing was judged"


def verdict(report: Report) -> str:
    """``PASS``, ``FAIL``, ``ERROR`` (the harness itself failed), ``SKIP`` or
    ``INTERRUPTED`` (stopped by Ctrl-C)."""
    if report.interrupted:
        return "INTERRUPTED"
    if report.error is not None:
        return "ERROR"
    if report.skipped is not None:
        return "SKIP"
    return "PASS" if report.passed else "FAIL"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.0f} s"


def start_text(report: Report) -> str | None:
    """How the nodes started, apart from the run's duration (which counts from their
    release): ``started in 12.3 s, release skew 0.214 s`` (None: the run never started)."""
    if report.startup is None:
        return None
    text = f"started in {duration(report.startup)}"
    if report.release_skew is not None:
        text += f", release skew {report.release_skew:.3f} s"
    return text


def result_line(report: Report, done: int | None = None, total: int | None = None) -> str:
    """One plain line for a finished scenario, e.g. for CI logs.

    ``[3/12] FAIL f28-black-hole-link  4 nodes  seed 2801  3.1 s  (2 violations; replay:
    harness run scenarios/f28.toml --seed 2801)``
    """
    prefix = f"[{done}/{total}] " if done is not None and total is not None else ""
    counts = ", ".join(f"{n} {s}" for s, n in outcome_counts(report)) or "no outcomes"
    line = (
        f"{prefix}{verdict(report)} {report.scenario.name}  {report.scenario.nodes} nodes  "
        f"seed {report.seed}  {duration(report.duration)}  [{counts}]"
    )
    start = start_text(report)
    if start is not None:
        line += f"  ({start})"
    if report.interrupted:
        line += f"  ({INTERRUPTED}; replay: {report.replay_command})"
    elif report.skipped is not None:
        line += f"  ({report.skip_reason})"
    elif not report.passed:
        why = f"{len(report.problems)} violation(s)" if report.problems else "harness error"
        line += f"  ({why}; replay: {report.replay_command})"
    elif report.violations:
        line += f"  ({len(report.violations)} known {report.scenario.backend} break(s))"
    idle = [str(f.index) for f in report.unexpectedly_idle]
    if idle:
        line += f"  (fault{'s' if len(idle) > 1 else ''} {', '.join(idle)} did not act)"
    return line


def totals_line(reports: Sequence[Report], wall: float | None = None) -> str:
    """``12 passed, 1 failed, 0 errors in 41.2 s`` (``wall``: elapsed time of the suite;
    ``, 2 skipped`` follows the errors when scenarios could not run on their backend or in
    their world)."""
    interrupted = sum(r.interrupted for r in reports)
    errors = sum(r.error is not None for r in reports)
    failed = sum(not r.passed for r in reports) - errors - interrupted
    skipped = sum(r.skipped is not None for r in reports)
    passed = len(reports) - failed - errors - skipped - interrupted
    line = f"{passed} passed, {failed} failed, {errors} errors"
    if skipped:
        line += f", {skipped} skipped"
    if interrupted:
        line += f", {interrupted} interrupted"
    return f"{line} in {duration(wall)}" if wall is not None else line


def idle_fault_lines(report: Report) -> list[str]:
    """One warning per fault of ``report`` that did not act (informational: not a failure).

    ``fault 1 (toxic on nodes 1-2: reset_peer upstream {'timeout': 0}) did not act (in
    place on 2 connections, but no data reached it there)``
    """
    lines = []
    for fault in report.unexpectedly_idle:
        what = f"{fault.kind} on nodes {short_ranges(fault.nodes)}"
        what = f"{what}: {fault.detail}" if fault.detail else what
        lines.append(f"fault {fault.index} ({what}) {fault.effects}")
    return lines


def outcome_line(outcome: NodeOutcome) -> str:
    parts = [f"node {outcome.node}: {outcome.status}"]
    if outcome.rank is not None:
        parts.append(f"rank {outcome.rank}")
    if outcome.world_size is not None:
        parts.append(f"world size {outcome.world_size}")
    if outcome.elapsed is not None:
        parts.append(f"after {outcome.elapsed:.3f} s")
    line = ", ".join(parts)
    if outcome.message:
        line += f" — {outcome.error_class or 'message'}: {outcome.message}"
    return line + shutdown_note(outcome)


def part_line(part: PartOutcome) -> str:
    """``node 1 worker 0: error, exit 1, rank 1 of 2, restart 1 — RuntimeError: ...``."""
    said = [f"node {part.node} {part.part}: {part.status}"]
    if part.exitcode is not None:
        said.append(f"exit {part.exitcode}")
    if part.rank is not None:
        said.append(f"rank {part.rank} of {part.world_size}")
    if part.restarts:
        said.append(f"restarts {part.restarts}" if part.part == "agent" else "restarted")
    if part.membership_restarts:
        said.append(f"{part.membership_restarts} of them for a membership change")
    if part.result is not None:
        said.append(f"result {part.result:g}")
    line = ", ".join(said)
    if part.message:
        line += f" — {part.error_class or 'message'}: {part.message}"
    return line


def part_lines(outcomes: Sequence[NodeOutcome], limit: int | None = None) -> list[str]:
    """One :func:`part_line` per part of each job node, in node order (none: no job); past
    ``limit`` nodes one line says how many more have parts."""
    ordered = sorted((o for o in outcomes if o.parts), key=lambda o: o.node)
    shown = ordered if limit is None else ordered[:limit]
    lines = [part_line(p) for o in shown for p in o.parts]
    if len(ordered) > len(shown):
        lines.append(f"parts of {len(ordered) - len(shown)} more job node(s) not shown")
    return lines


def output_lines(outcome: NodeOutcome, limit: int = 15) -> list[str]:
    """The last ``limit`` lines node ``outcome.node`` wrote to stdout/stderr, indented under
    a heading (nothing when it wrote nothing)."""
    if not outcome.output:
        return []
    tail = outcome.output.rstrip().splitlines()[-limit:]
    return [f"output of node {outcome.node} (last {len(tail)} lines):", *(f"  | {x}" for x in tail)]


def folded_output_lines(
    outcomes: Sequence[NodeOutcome], flagged: set[int], limit: int, tail: int = 15
) -> list[str]:
    """:func:`output_lines` of each node, nodes with the same output once (``output of
    nodes 1-4095 (last 3 lines, the same on each):``): those with a node in ``flagged``
    (named by a violation) first, the rarest output first, at most ``limit`` of them, then
    ``output of 12 more node(s) not shown (3 distinct)``."""
    same: dict[str, list[NodeOutcome]] = {}
    for o in sorted(outcomes, key=lambda o: o.node):
        if o.output:
            same.setdefault(o.output, []).append(o)
    groups = sorted(same.values(), key=lambda g: (not any(o.node in flagged for o in g), len(g)))
    lines = []
    for group in groups[:limit]:
        head, *rest = output_lines(group[0], tail)
        if len(group) > 1:
            nodes = nodes_label([o.node for o in group])
            head = head.replace(f"node {group[0].node} ", f"{nodes} ", 1)
            head = head.replace(" lines):", " lines, the same on each):")
        lines += [head, *rest]
    hidden = groups[limit:]
    if hidden:
        count = sum(len(g) for g in hidden)
        lines.append(f"output of {count} more node(s) not shown ({len(hidden)} distinct)")
    return lines


def fault_line(fault: FaultRecord) -> str:
    """``fault 0 toxic on nodes 3 from 0.06 s to the end: timeout upstream; acted: 1
    connection black-holed`` (or ``; did not act ...``); a fault that never fired says
    when it was due: ``fault 1 kill on nodes 2, due at 30.00 s: did not act (never fired:
    ...)``."""
    line = f"fault {fault.index} {fault.kind} on nodes {short_ranges(fault.nodes)}"
    if not fault.fired:
        return f"{line}, due {fault.detail}: {fault.effects}"
    end = "the end" if fault.end is None else f"{fault.end:.2f} s"
    line += f" from {fault.start:.2f} s to {end}"
    line = f"{line}: {fault.detail}" if fault.detail else line
    if fault.acted and not fault.idle:
        return f"{line}; acted: {fault.effects}"
    return f"{line}; {fault.effects}"
