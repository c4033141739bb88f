"""JUnit XML of :class:`~harness.run.model.Report` objects, for CI.

:func:`junit_xml` / :func:`write_junit` — one ``<testsuite>``, one ``<testcase>`` per
scenario; a ``<failure>`` (violated checks) or ``<error>`` (the harness itself failed)
carrying the seed and the replay command; per-node outcomes, what each fault did and a
warning per fault that did not act in ``<system-out>``. Pure: the caller passes the
timestamp.

Large runs stay bounded: look-alike violations share a line (:mod:`harness.report.fold`),
and beyond :data:`~harness.report.fold.FOLD_ABOVE` nodes so do look-alike node outcomes
and identical output tails, each list capped (:data:`VIOLATIONS_SHOWN`,
:data:`OUTCOMES_SHOWN`, :data:`OUTPUTS_SHOWN`) with one line for the rest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from harness.report.fold import (
    FOLD_ABOVE,
    Fold,
    fold_lines,
    nodes_label,
    outcome_folds,
    placement_line,
    violation_folds,
)
from harness.report.text import (
    INTERRUPTED,
    fault_line,
    folded_output_lines,
    idle_fault_lines,
    outcome_line,
    output_lines,
    part_lines,
    start_text,
)
from harness.run.model import Report

__all__ = ["junit_xml", "write_junit"]


# XML 1.0 forbids most control characters; node messages may carry anything.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: str) -> str:
    return _XML_ILLEGAL.sub("\N{REPLACEMENT CHARACTER}", text)


#: At most this many distinct violations / node outcomes / node outputs in one test case.
VIOLATIONS_SHOWN = 50
OUTCOMES_SHOWN = 100
OUTPUTS_SHOWN = 8


def _violation_line(fold: Fold) -> str:
    return fold.text if fold.count == 1 else f"{fold.line}  ({nodes_label(fold.nodes)})"


def _folds(report: Report) -> list[Fold]:
    """The violations, look-alike ones folded beyond :data:`FOLD_ABOVE` nodes."""
    return violation_folds(report.problems, len(report.outcomes) > FOLD_ABOVE)


def _failure_text(report: Report) -> str:
    folds = _folds(report)
    lines = fold_lines(folds, VIOLATIONS_SHOWN, _violation_line)
    if report.error is not None:
        lines.append(report.error)
    lines += [f"seed: {report.seed}", f"replay: {report.replay_command}"]
    return "\n".join(lines)


def _node_lines(report: Report) -> list[str]:
    """Each node's outcome and output tail; beyond :data:`FOLD_ABOVE` nodes, nodes that
    ended alike share a line and nodes with the same output share it (nodes named by a
    violation first, the rarest output first), a bounded number of each."""
    placement = placement_line(report.outcomes)
    lines = [] if placement is None else [f"placement: {placement}"]
    if len(report.outcomes) <= FOLD_ABOVE:
        lines += [outcome_line(o) for o in report.outcomes] + part_lines(report.outcomes)
        return lines + [line for o in report.outcomes for line in output_lines(o)]
    lines += fold_lines(outcome_folds(report.outcomes, outcome_line), OUTCOMES_SHOWN)
    lines += part_lines(report.outcomes, OUTCOMES_SHOWN)
    flagged = {n for v in report.problems for n in v.nodes}
    return lines + folded_output_lines(report.outcomes, flagged, OUTPUTS_SHOWN)


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
        folds = _folds(report)
        summary = "; ".join(_violation_line(f) for f in folds[:3])
        if len(folds) > 3:
            summary += f"; and {len(folds) - 3} more"
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
        *([f"start: {start_text(report)}"] if report.startup is not None else []),
        *(f"known break: [{v.check}] {v.message}" for v in report.violations if v.known),
        f"replay: {report.replay_command}",
        *(f"warning: {line}" for line in idle_fault_lines(report)),
        *(fault_line(f) for f in report.faults),
        *_node_lines(report),
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
            idle = ",".join(str(f.index) for f in report.unexpectedly_idle)
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
