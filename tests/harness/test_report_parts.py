"""A job scenario's report shows each part of each job node (agent, workers): its outcome,
exit code, rank, restarts, result and message -- in the console's failure panel and
``-v`` details, the JUnit output and the HTML report."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from report_samples import scenario
from rich.console import Console

from harness.report.console import detail_panel, print_summary
from harness.report.html import render_html
from harness.report.junit import junit_xml
from harness.report.text import part_line
from harness.run.checks import check
from harness.run.model import NodeOutcome, PartOutcome, Report


def job_report() -> Report:
    """Two job nodes; node 1's worker crashed and its agent failed the job."""
    sc = scenario("job-crash", 2, job={}, expect={"outcome": "ok"})
    ok = [
        PartOutcome(0, "agent", "ok", exitcode=0, rank=0, world_size=2, restarts=0),
        PartOutcome(0, "worker 0", "ok", exitcode=0, rank=0, world_size=2, result=3.0),
    ]
    crashed = [
        PartOutcome(
            1, "agent", "error", exitcode=1, rank=1, world_size=2, restarts=1,
            error_class="ChildFailedError", message="workers failed: worker 0 exit 1",
        ),
        PartOutcome(
            1, "worker 0", "error", exitcode=1, rank=1, world_size=2, restarts=1,
            error_class="builtins.RuntimeError", message="node 1's worker gives up",
        ),
    ]  # fmt: skip
    outcomes = [
        NodeOutcome(0, "ok", rank=0, world_size=2, parts=ok),
        NodeOutcome(1, "error", message="workers failed: worker 0 exit 1", parts=crashed),
    ]
    report = Report(sc, 5, outcomes, duration=9.0)
    parts = [p for o in outcomes for p in o.parts]
    report.violations = check(sc, outcomes, parts=parts)
    return report


WORKER_LINE = (
    "node 1 worker 0: error, exit 1, rank 1 of 2, restarted — builtins.RuntimeError: "
    "node 1's worker gives up"
)
AGENT_LINE = (
    "node 1 agent: error, exit 1, rank 1 of 2, restarts 1 — ChildFailedError: "
    "workers failed: worker 0 exit 1"
)


def _console(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    if isinstance(renderable, list):
        print_summary(renderable, console)
    else:
        console.print(renderable)
    return console.export_text()


def test_the_console_failure_panel_has_a_line_per_part_of_each_job_node() -> None:
    text = _console([job_report()])
    assert AGENT_LINE in text and WORKER_LINE in text
    assert "node 0 worker 0: ok, exit 0, rank 0 of 2, result 3" in text


def test_the_detail_panel_lists_the_parts_of_a_passing_job_too() -> None:
    report = job_report()
    report.outcomes = report.outcomes[:1]
    report.violations = []
    text = _console(detail_panel(report))
    assert "node 0 agent: ok, exit 0, rank 0 of 2" in text
    assert "node 0 worker 0: ok, exit 0, rank 0 of 2, result 3" in text


def test_junit_system_out_names_every_part(tmp_path: Path) -> None:
    out = junit_xml([job_report()]).getroot().findtext("testsuite/testcase/system-out") or ""
    assert WORKER_LINE in out and AGENT_LINE in out


def test_the_html_report_has_a_table_of_the_job_parts() -> None:
    html = render_html([job_report()])
    assert "job parts (4: each node's torchrun agent and workers)" in html
    row = html[html.index("<td>worker 0</td>", html.index("job parts")) :]
    assert "ok" in row[:400] and "3" in row[:400]
    assert "node 1&#39;s worker gives up" in html or "node 1's worker gives up" in html
    assert "workers failed: worker 0 exit 1" in html


def test_a_report_without_a_job_shows_no_parts() -> None:
    report = Report(scenario("plain", 1), 1, [NodeOutcome(0, "ok", rank=0, world_size=1)])
    assert "job parts" not in render_html([report])
    assert " agent:" not in _console(detail_panel(report))


def test_a_part_line_says_how_many_restarts_were_for_a_membership_change() -> None:
    agent = PartOutcome(0, "agent", "ok", exitcode=0, rank=0, world_size=2, restarts=2)
    assert part_line(agent) == "node 0 agent: ok, exit 0, rank 0 of 2, restarts 2"
    agent = replace(agent, membership_restarts=1)
    assert part_line(agent) == (
        "node 0 agent: ok, exit 0, rank 0 of 2, restarts 2, 1 of them for a membership change"
    )
