"""Render :class:`~harness.model.Report` objects: console summary and JUnit XML.

The HTML timeline lives in :mod:`harness.report_html`. Every renderer here is a pure
function of the reports (no clock reads): the caller passes a timestamp where one is shown.

* :func:`summary_table` / :func:`print_summary` — a rich table (scenario, seed, nodes,
  outcome counts, duration, PASS/FAIL), a warning per fault that did not act, then, for
  each failure, its violations, what each fault did, seed and replay command.
* :func:`result_line` — one plain line per finished scenario (progress in CI logs).
* :func:`junit_xml` / :func:`write_junit` — one ``<testsuite>``, one ``<testcase>`` per
  scenario; a ``<failure>`` (violated checks) or ``<error>`` (the harness itself failed)
  carrying the seed and the replay command; per-node outcomes, what each fault did and a
  warning per fault that did not act in ``<system-out>``.

Everything taken from files or from nodes (names, paths, messages, backend names such as
``mod:factory:``) reaches rich as :class:`~rich.text.Text`, never as markup: it is printed
literally, brackets and ``:emoji:`` codes included.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from harness.model import FaultRecord, NodeOutcome, Report
from harness.scenario import OUTCOMES
from harness.timeline import node_ranges

__all__ = [
    "STATUS_STYLES",
    "failure_panel",
    "fault_line",
    "idle_fault_lines",
    "junit_xml",
    "node_ranges",
    "outcome_counts",
    "output_lines",
    "print_summary",
    "result_line",
    "summary_table",
    "totals_line",
    "verdict",
    "write_junit",
]

#: rich styles of the node outcomes (the HTML report has its own palette).
STATUS_STYLES = {
    "ok": "green",
    "timeout": "yellow",
    "connection_error": "bright_blue",
    "state_error": "magenta",
    "closed": "cyan",
    "error": "red",
    "killed": "bold red",
    "hung": "bold magenta",
    "absent": "dim",
}

# XML 1.0 forbids most control characters; node messages may carry anything.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def outcome_counts(report: Report) -> list[tuple[str, int]]:
    """``(status, how many nodes)`` in :data:`~harness.scenario.OUTCOMES` order, non-zero only."""
    counts = Counter(o.status for o in report.outcomes)
    known = [(status, counts[status]) for status in OUTCOMES if counts[status]]
    unknown = sorted((s, n) for s, n in counts.items() if s not in OUTCOMES)
    return known + unknown


def _counts_text(report: Report) -> Text:
    text = Text()
    for status, count in outcome_counts(report):
        if text:
            text.append("  ")
        text.append(f"{count} {status}", style=STATUS_STYLES.get(status, ""))
    if not text:
        text.append("no outcomes", style="dim")
    return text


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


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.0f} s"


def result_line(report: Report, done: int | None = None, total: int | None = None) -> str:
    """One plain line for a finished scenario, e.g. for CI logs.

    ``[3/12] FAIL f28-black-hole-link  4 nodes  seed 2801  3.1 s  (2 violations; replay:
    harness run scenarios/f28.toml --seed 2801)``
    """
    prefix = f"[{done}/{total}] " if done is not None and total is not None else ""
    counts = ", ".join(f"{n} {s}" for s, n in outcome_counts(report)) or "no outcomes"
    line = (
        f"{prefix}{verdict(report)} {report.scenario.name}  {report.scenario.nodes} nodes  "
        f"seed {report.seed}  {_duration(report.duration)}  [{counts}]"
    )
    if report.interrupted:
        line += f"  ({INTERRUPTED}; replay: {report.replay_command})"
    elif report.skipped is not None:
        line += f"  (not run on {report.scenario.backend}: {report.skipped})"
    elif not report.passed:
        why = f"{len(report.problems)} violation(s)" if report.problems else "harness error"
        line += f"  ({why}; replay: {report.replay_command})"
    elif report.violations:
        line += f"  ({len(report.violations)} known {report.scenario.backend} break(s))"
    idle = [str(f.index) for f in report.idle_faults]
    if idle:
        line += f"  (fault{'s' if len(idle) > 1 else ''} {', '.join(idle)} did not act)"
    return line


def totals_line(reports: Sequence[Report], wall: float | None = None) -> str:
    """``12 passed, 1 failed, 0 errors in 41.2 s`` (``wall``: elapsed time of the suite;
    ``, 2 skipped`` follows the errors when scenarios could not run on their backend)."""
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
    return f"{line} in {_duration(wall)}" if wall is not None else line


def summary_table(reports: Sequence[Report]) -> Table:
    """The rich summary table, one row per report."""
    table = Table(title="harness run", title_justify="left", header_style="bold")
    table.add_column("scenario", no_wrap=True)
    table.add_column("seed", justify="right", no_wrap=True)
    table.add_column("nodes", justify="right")
    table.add_column("outcomes")
    table.add_column("duration", justify="right", no_wrap=True)
    table.add_column("result", justify="center", no_wrap=True)
    for report in reports:
        shown = verdict(report)
        style = {"PASS": "bold green", "SKIP": "bold yellow"}.get(shown, "bold red")
        table.add_row(
            Text(report.scenario.name),
            str(report.seed),
            str(report.scenario.nodes),
            _counts_text(report),
            _duration(report.duration),
            Text(shown, style=style),
        )
    return table


def failure_panel(report: Report) -> Panel:
    """What went wrong in one failed report: violations or error, what each fault did,
    seed, replay command."""
    lines: list[Text] = []
    for violation in report.problems:
        line = Text("• ", style="red")
        line.append(f"[{violation.check}] ", style="bold")
        line.append(violation.message)
        if violation.nodes:
            line.append(f"  (nodes {node_ranges(violation.nodes)})", style="dim")
        lines.append(line)
    if report.error is not None:
        lines.append(Text(report.error, style="red"))
    if report.interrupted:
        lines.append(Text(INTERRUPTED, style="red"))
    for fault in report.faults:
        lines.append(Text(fault_line(fault), style="yellow" if fault.idle else "dim"))
    lines.append(Text.assemble(("seed   ", "bold"), str(report.seed)))
    lines.append(Text.assemble(("replay ", "bold"), (report.replay_command, "cyan")))
    title = Text(f"{verdict(report)} {report.scenario.name}")
    return Panel(Group(*lines), title=title, title_align="left", border_style="red")


def idle_fault_lines(report: Report) -> list[str]:
    """One warning per fault of ``report`` that did not act (informational: not a failure).

    ``fault 1 (toxic on nodes 1-2: reset_peer upstream {'timeout': 0}) did not act (in
    place on 2 connections, but no data reached it there)``
    """
    lines = []
    for fault in report.idle_faults:
        what = f"{fault.kind} on nodes {node_ranges(fault.nodes)}"
        what = f"{what}: {fault.detail}" if fault.detail else what
        lines.append(f"fault {fault.index} ({what}) {fault.effects}")
    return lines


def print_summary(reports: Sequence[Report], console: Console, wall: float | None = None) -> None:
    """Print the summary table, a warning per fault that did not act, a panel per failed
    report, and the totals line."""
    console.print(summary_table(reports))
    for report in reports:
        for warning in idle_fault_lines(report):
            line = Text("warning: ", style="bold yellow")
            line.append(f"{report.scenario.name}: {warning}")
            console.print(line)
    for report in reports:
        if not report.passed:
            console.print(failure_panel(report))
    style = "bold green" if all(r.passed for r in reports) else "bold red"
    console.print(Text(totals_line(reports, wall), style=style))


# --- JUnit XML ----------------------------------------------------------------------


def _clean(text: str) -> str:
    return _XML_ILLEGAL.sub("\N{REPLACEMENT CHARACTER}", text)


def _outcome_line(outcome: NodeOutcome) -> str:
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
    return line


def output_lines(outcome: NodeOutcome, limit: int = 15) -> list[str]:
    """The last ``limit`` lines node ``outcome.node`` wrote to stdout/stderr, indented under
    a heading (nothing when it wrote nothing)."""
    if not outcome.output:
        return []
    tail = outcome.output.rstrip().splitlines()[-limit:]
    return [f"output of node {outcome.node} (last {len(tail)} lines):", *(f"  | {x}" for x in tail)]


def fault_line(fault: FaultRecord) -> str:
    """``fault 0 toxic on nodes 3 from 0.06 s to the end: timeout upstream; acted: 1
    connection black-holed`` (or ``; did not act ...``)."""
    end = "the end" if fault.end is None else f"{fault.end:.2f} s"
    line = f"fault {fault.index} {fault.kind} on nodes {node_ranges(fault.nodes)}"
    line += f" from {fault.start:.2f} s to {end}"
    line = f"{line}: {fault.detail}" if fault.detail else line
    if fault.acted and not fault.idle:
        return f"{line}; acted: {fault.effects}"
    return f"{line}; {fault.effects}"


def _failure_text(report: Report) -> str:
    lines = [f"[{v.check}] {v.message}" for v in report.problems]
    if report.error is not None:
        lines.append(report.error)
    lines += [f"seed: {report.seed}", f"replay: {report.replay_command}"]
    return "\n".join(lines)


def _testcase(parent: ET.Element, report: Report, classname: str) -> None:
    case = ET.SubElement(
        parent,
        "testcase",
        name=report.scenario.name,
        classname=classname,
        time=f"{report.duration:.3f}",
    )
    if report.error is not None:
        first = report.error.splitlines()[0] if report.error else "harness error"
        error = ET.SubElement(case, "error", message=_clean(first), type="HarnessError")
        error.text = _clean(_failure_text(report))
    elif report.interrupted:
        error = ET.SubElement(case, "error", message=INTERRUPTED, type="Interrupted")
        error.text = _clean(_failure_text(report))
    elif report.skipped is not None:
        ET.SubElement(case, "skipped", message=_clean(report.skipped))
    elif report.problems:
        problems = report.problems
        summary = "; ".join(f"[{v.check}] {v.message}" for v in problems[:3])
        if len(problems) > 3:
            summary += f"; and {len(problems) - 3} more"
        failure = ET.SubElement(
            case,
            "failure",
            message=_clean(f"{summary} (seed {report.seed})"),
            type=",".join(sorted({v.check for v in problems})),
        )
        failure.text = _clean(_failure_text(report))
    out = [
        f"scenario: {report.scenario.name} ({report.scenario.path or 'no file'})",
        f"backend: {report.scenario.backend}",
        f"seed: {report.seed}",
        *(f"known break: [{v.check}] {v.message}" for v in report.violations if v.known),
        f"replay: {report.replay_command}",
        *(f"warning: {line}" for line in idle_fault_lines(report)),
        *(fault_line(f) for f in report.faults),
        *(_outcome_line(o) for o in report.outcomes),
        *(line for o in report.outcomes for line in output_lines(o)),
    ]
    ET.SubElement(case, "system-out").text = _clean("\n".join(out))


def _classname(report: Report) -> str:
    """The scenario file's directory name (``scenarios``), dots made safe for CI viewers."""
    path = report.scenario.path
    parent = Path(path).parent.name if path else ""
    return parent.replace(".", "_") or "scenarios"


def junit_xml(
    reports: Sequence[Report], suite_name: str = "harness", timestamp: str | None = None
) -> ET.ElementTree[ET.Element]:
    """A JUnit XML document: ``<testsuites>`` holding one ``<testsuite>``.

    Args:
        reports: one test case each.
        suite_name: the ``name`` of the suite.
        timestamp: start time of the run, ``YYYY-MM-DDTHH:MM:SS`` (UTC, no zone suffix, as
            the JUnit schema wants it), set when given.
    """
    errors = sum(r.error is not None or r.interrupted for r in reports)
    failures = sum(not r.passed for r in reports) - errors
    skipped = sum(r.skipped is not None for r in reports)
    total_time = f"{sum(r.duration for r in reports):.3f}"
    counts = {
        "tests": str(len(reports)),
        "failures": str(failures),
        "errors": str(errors),
        "time": total_time,
    }
    root = ET.Element("testsuites", {"name": suite_name, **counts})
    suite = ET.SubElement(
        root, "testsuite", {"name": suite_name, **counts, "skipped": str(skipped)}
    )
    if timestamp is not None:
        suite.set("timestamp", timestamp)
    if reports:
        properties = ET.SubElement(suite, "properties")
        for report in reports:
            name = f"seed.{report.scenario.name}"
            ET.SubElement(properties, "property", name=name, value=str(report.seed))
            idle = ",".join(str(f.index) for f in report.idle_faults)
            if idle:
                name = f"faults_not_acting.{report.scenario.name}"
                ET.SubElement(properties, "property", name=name, value=idle)
    for report in reports:
        _testcase(suite, report, _classname(report))
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(
    reports: Sequence[Report],
    path: str | Path,
    suite_name: str = "harness",
    timestamp: str | None = None,
) -> None:
    """Write :func:`junit_xml` to ``path`` (UTF-8, with an XML declaration).

    Raises:
        OSError: the file cannot be written.
    """
    junit_xml(reports, suite_name, timestamp).write(path, encoding="utf-8", xml_declaration=True)
