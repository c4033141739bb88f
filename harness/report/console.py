"""The console summary of :class:`~harness.run.model.Report` objects (rich).

* :func:`summary_table` / :func:`print_summary` — a rich table (scenario, seed, nodes,
  outcome counts, duration, PASS/FAIL), a warning per fault that did not act, then, for
  each failure, its violations, what each fault did, how its nodes ended, where they ran
  (when the world says), seed and replay command. Nodes that say the same thing share a
  line (:mod:`harness.report.fold`), so a failed 4096-node run stays a screenful.
  ``verbose`` (``harness run -v``): before them, a panel per run, passing ones too, with
  what each node said and did (:mod:`harness.report.details`).

Everything taken from files or from nodes (names, paths, messages, backend names such as
``mod:factory:``) reaches rich as :class:`~rich.text.Text`, never as markup: it is printed
literally, brackets and ``:emoji:`` codes included.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from harness.report.details import detail_lines
from harness.report.fold import (
    FOLD_ABOVE,
    fold_lines,
    outcome_folds,
    placement_line,
    short_ranges,
    violation_folds,
)
from harness.report.text import (
    INTERRUPTED,
    duration,
    fault_line,
    idle_fault_lines,
    outcome_counts,
    outcome_line,
    part_lines,
    totals_line,
    verdict,
)
from harness.run.model import Report

__all__ = [
    "FOLDS_SHOWN",
    "STATUS_STYLES",
    "detail_panel",
    "failure_panel",
    "print_summary",
    "summary_table",
]

#: A failure panel shows at most this many distinct violations and node outcomes (nodes
#: that say the same thing are one line); one line sums up the rest.
FOLDS_SHOWN = 12


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


def _counts_text(report: Report) -> Text:
    text = Text()
    for status, count in outcome_counts(report):
        if text:
            text.append("  ")
        text.append(f"{count} {status}", style=STATUS_STYLES.get(status, ""))
    if not text:
        text.append("no outcomes", style="dim")
    return text


def summary_table(reports: Sequence[Report], title: str = "harness run") -> Table:
    """The rich summary table, one row per report, titled after the command."""
    table = Table(title=title, title_justify="left", header_style="bold")
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
            duration(report.duration),
            Text(shown, style=style),
        )
    return table


def failure_panel(report: Report) -> Panel:
    """What went wrong in one failed report: violations or error, what each fault did,
    seed, replay command."""
    lines: list[Text] = []
    # Up to FOLD_ABOVE nodes each violation in its own words (at most one per node or so);
    # beyond, look-alike ones folded and the distinct lines capped.
    many = len(report.outcomes) > FOLD_ABOVE
    folds = violation_folds(report.problems, fold=many)
    shown = FOLDS_SHOWN if many else len(folds)
    for fold in folds[:shown]:
        check, _, message = fold.text.partition("] ")
        line = Text("• ", style="red")
        line.append(f"{check}] ", style="bold")
        line.append(message)
        if fold.nodes:
            count = (
                f"{len(fold.nodes)} nodes: "
                if fold.count > 1
                else "node "
                if len(fold.nodes) == 1
                else "nodes "
            )
            line.append(f"  ({count}{short_ranges(fold.nodes)})", style="dim")
        lines.append(line)
    lines += [Text(x, style="red") for x in fold_lines(folds, shown)[shown:]]
    if report.error is not None:
        lines.append(Text(report.error, style="red"))
    if report.interrupted:
        lines.append(Text(INTERRUPTED, style="red"))
    for fault in report.faults:
        lines.append(Text(fault_line(fault), style="yellow" if fault.flagged else "dim"))
    ended = fold_lines(outcome_folds(report.outcomes, outcome_line), FOLDS_SHOWN)
    ended += part_lines(report.outcomes, FOLDS_SHOWN)
    lines += [Text(x) for x in ended]
    placement = placement_line(report.outcomes)
    if placement is not None:
        lines.append(Text.assemble(("placement ", "bold"), placement))
    lines.append(Text.assemble(("seed   ", "bold"), str(report.seed)))
    lines.append(Text.assemble(("replay ", "bold"), (report.replay_command, "cyan")))
    title = Text(f"{verdict(report)} {report.scenario.name}")
    return Panel(Group(*lines), title=title, title_align="left", border_style="red")


def detail_panel(report: Report) -> Panel:
    """What each node of one run said and did, passing or not (``harness run -v``)."""
    lines = [Text(line) for line in detail_lines(report)]
    shown = verdict(report)
    title = Text(f"{shown} {report.scenario.name} (seed {report.seed})")
    border = {"PASS": "green", "SKIP": "yellow"}.get(shown, "red")
    return Panel(Group(*lines), title=title, title_align="left", border_style=border)


def print_summary(
    reports: Sequence[Report],
    console: Console,
    wall: float | None = None,
    title: str = "harness run",
    verbose: bool = False,
) -> None:
    """Print the summary table (titled ``title``, the command), a warning per fault that
    did not act, with ``verbose`` a panel of what the nodes said per run that ran, a panel
    per failed report, and the totals line."""
    console.print(summary_table(reports, title))
    if verbose:
        for report in reports:
            if report.skipped is None:
                console.print(detail_panel(report))
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
