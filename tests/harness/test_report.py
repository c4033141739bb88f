"""The report renderers, fed reports built from model objects (no processes)."""

from __future__ import annotations

import colorsys
import io
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chromium import CHROMIUM, screenshot
from report_samples import (
    big_report,
    error_report,
    failing_report,
    happy_report,
    idle_fault_report,
)
from rich.color import Color
from rich.console import Console

from harness.report.console import STATUS_STYLES, print_summary
from harness.report.glyphs import STATUS_COLORS
from harness.report.html import render_html, write_html
from harness.report.junit import junit_xml, write_junit
from harness.report.text import result_line
from harness.report.timeline import FAULT_COLORS, layout, nice_ticks, node_ranges
from harness.run.model import FaultRecord, NodeEvent, Report, Violation
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse


def console_text(reports: list[Report]) -> str:
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    print_summary(reports, console, wall=12.5)
    return console.export_text()


# --- console -------------------------------------------------------------------------


def test_console_summary_shows_each_scenario_with_seed_counts_and_verdict() -> None:
    text = console_text([happy_report(), failing_report()])
    happy = next(line for line in text.splitlines() if "happy-three" in line)
    assert re.search(r"happy-three\s+│\s+7\s+│\s+3\s+│\s+3 ok\s+│\s+0\.3 s\s+│\s+PASS", happy)
    failing = next(line for line in text.splitlines() if "black-hole-and-kill │" in line)
    assert "2801" in failing
    assert "2 timeout  1 connection_error  1 killed" in failing
    assert "FAIL" in failing
    assert "1 passed, 1 failed, 0 errors in 12.5 s" in text


def test_console_names_violations_seed_and_replay_command_of_a_failure_only() -> None:
    text = console_text([happy_report(), failing_report()])
    assert "[outcome] node 1 ended 'killed', expected 'timeout'  (node 1)" in text
    assert "replay harness run scenarios/black-hole-and-kill.toml --seed 2801" in text
    assert "scenarios/happy-three.toml --seed" not in text


def test_console_shows_the_harness_error_of_a_run_that_crashed() -> None:
    text = console_text([error_report()])
    assert "ERROR proxy-unreachable" in text
    assert "ToxiproxyUnreachableError: nothing" in text
    assert "0 passed, 0 failed, 1 errors" in text


def test_result_line_carries_the_replay_command_only_when_the_scenario_failed() -> None:
    failed = result_line(failing_report(), 2, 5)
    assert failed.startswith("[2/5] FAIL black-hole-and-kill  4 nodes  seed 2801")
    assert failed.endswith(
        "(2 violation(s); replay: harness run scenarios/black-hole-and-kill.toml --seed 2801)"
    )
    passed = result_line(happy_report())
    assert passed.startswith("PASS happy-three")
    assert "replay" not in passed


def test_node_ranges_compacts_runs_of_consecutive_nodes() -> None:
    assert node_ranges([5, 0, 1, 2, 7, 8]) == "0-2, 5, 7-8"
    assert node_ranges([]) == ""


# --- JUnit XML -----------------------------------------------------------------------

# The parts of the common (Jenkins/Ant) JUnit schema a report uses: children allowed per
# element, in order, and required attributes.
SCHEMA = {
    "testsuites": (["testsuite"], {"name", "tests", "failures", "errors", "time"}),
    "testsuite": (
        ["properties", "testcase", "system-out", "system-err"],
        {"name", "tests", "failures", "errors", "skipped", "time"},
    ),
    "properties": (["property"], set()),
    "property": ([], {"name", "value"}),
    "testcase": (
        ["skipped", "error", "failure", "system-out", "system-err"],
        {"name", "classname", "time"},
    ),
    "failure": ([], {"message", "type"}),
    "error": ([], {"message", "type"}),
    "system-out": ([], set()),
}


def assert_schema_shape(element: ET.Element) -> None:
    children, required = SCHEMA[element.tag]
    assert required <= set(element.attrib), (element.tag, element.attrib)
    order = [children.index(child.tag) for child in element]
    assert order == sorted(order), f"{element.tag} children out of order"
    for child in element:
        assert_schema_shape(child)
    if "time" in element.attrib:
        float(element.attrib["time"])


def parse_junit(reports: list[Report], tmp_path: Path) -> ET.Element:
    path = tmp_path / "junit.xml"
    write_junit(reports, path, timestamp="2026-12-02T15:00:00")
    assert path.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    return ET.parse(path).getroot()


def test_junit_has_one_suite_and_one_testcase_per_scenario(tmp_path: Path) -> None:
    root = parse_junit([happy_report(), failing_report(), error_report()], tmp_path)
    assert_schema_shape(root)
    (suite,) = root.findall("testsuite")
    assert suite.attrib | {"time": "x"} == {
        "name": "harness",
        "tests": "3",
        "failures": "1",
        "errors": "1",
        "skipped": "0",
        "time": "x",
        "timestamp": "2026-12-02T15:00:00",
    }
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["happy-three", "black-hole-and-kill", "proxy-unreachable"]
    assert {case.get("classname") for case in suite.iter("testcase")} == {"scenarios"}
    seeds = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert seeds["seed.black-hole-and-kill"] == "2801"


def test_junit_failure_carries_violations_seed_and_replay_command(tmp_path: Path) -> None:
    root = parse_junit([happy_report(), failing_report()], tmp_path)
    happy, failing = root.iter("testcase")
    assert happy.find("failure") is None
    failure = failing.find("failure")
    assert failure is not None
    assert failure.get("type") == "message,outcome"
    assert "(seed 2801)" in (failure.get("message") or "")
    assert failure.text is not None
    assert "[outcome] node 1 ended 'killed', expected 'timeout'" in failure.text
    assert "seed: 2801" in failure.text
    assert "replay: harness run scenarios/black-hole-and-kill.toml --seed 2801" in failure.text


def test_junit_system_out_lists_every_node_outcome_and_fault(tmp_path: Path) -> None:
    root = parse_junit([failing_report()], tmp_path)
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    lines = out.text.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("node ")] == [
        "node 0",
        "node 1",
        "node 2",
        "node 3",
    ]
    assert "node 1: killed, rank 1, world size 4, after 0.975 s" in out.text
    assert "fault 1 pause on nodes 2 from 0.50 s to 2.50 s; acted: 1 node paused" in lines
    assert (
        "fault 0 toxic on nodes 3 from 0.06 s to the end: timeout upstream {'timeout': 0}; "
        "acted: 1 connection black-holed" in lines
    )


def test_junit_reports_a_crashed_run_as_an_error_with_its_seed(tmp_path: Path) -> None:
    root = parse_junit([error_report()], tmp_path)
    error = root.find("testsuite/testcase/error")
    assert error is not None and error.text is not None
    assert error.get("message") == "the harness failed while running the scenario:"
    assert "ToxiproxyUnreachableError" in error.text
    assert "seed: 5" in error.text


def test_junit_replaces_characters_xml_cannot_carry(tmp_path: Path) -> None:
    report = failing_report()
    report.outcomes[3].message = "peer sent \x00\x1b[31m garbage"
    report.violations = [Violation("message", "got \x07 bell", (3,))]
    root = parse_junit([report], tmp_path)
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    assert "got \N{REPLACEMENT CHARACTER} bell" in failure.text
    assert "\N{REPLACEMENT CHARACTER}\N{REPLACEMENT CHARACTER}[31m garbage" in ET.tostring(
        root, encoding="unicode"
    )


def test_junit_of_no_reports_is_an_empty_valid_suite() -> None:
    root = junit_xml([]).getroot()
    assert_schema_shape(root)
    assert root.get("tests") == "0"
    assert root.find("testsuite/properties") is None


# --- HTML ----------------------------------------------------------------------------

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}


class TagBalance(HTMLParser):
    """Fails on any end tag that does not close the innermost open element."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass  # <line/>, <path/> inside SVG

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def assert_well_formed(html: str) -> None:
    checker = TagBalance()
    checker.feed(html)
    checker.close()
    assert checker.problems == []
    assert checker.stack == []
    for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S):
        ET.fromstring(svg)  # every SVG is well-formed XML


def lanes(html: str) -> list[str]:
    return re.findall(r'<g class="lane" data-nodes="([^"]*)"', html)


def test_html_is_well_formed_and_has_a_section_per_scenario() -> None:
    html = render_html([happy_report(), failing_report(), error_report()], generated="today")
    assert_well_formed(html)
    assert html.startswith("<!DOCTYPE html>")
    for name in ("happy-three", "black-hole-and-kill", "proxy-unreachable"):
        assert f"<h2>{name}</h2>" in html
    assert '<span class="chip pass">1 passed</span>' in html
    assert '<span class="chip fail">1 failed</span>' in html
    assert "No timeline: no node reported anything." in html


def test_html_timeline_has_one_lane_per_node_with_its_outcome_badge() -> None:
    html = render_html([failing_report()])
    assert lanes(html) == ["0", "1", "2", "3"]
    badges = re.findall(r'<text class="btext"[^>]*>([^<]*)</text>', html)
    assert badges == ["timeout 3.0 s", "killed 1.0 s", "timeout 3.0 s", "connection_error 3.0 s"]
    assert "✗ node 1" in html and "✗ node 3" in html and "✗ node 0" not in html


def test_html_shades_each_fault_window_across_the_lanes_it_targets() -> None:
    report = failing_report()
    tl = layout(report)
    assert [(b.color, b.open_end, b.instant) for b in tl.bands] == [
        (FAULT_COLORS["toxic"], True, False),
        (FAULT_COLORS["pause"], False, False),
        (FAULT_COLORS["kill"], False, True),
    ]
    toxic, pause, _ = tl.bands
    node2, node3 = tl.lanes[2], tl.lanes[3]
    assert (toxic.y, toxic.h) == (node3.y, node3.h)
    assert toxic.x + toxic.w == pytest.approx(tl.plot_x + tl.plot_w)  # until the end
    assert (pause.y, pause.h) == (node2.y, node2.h)
    assert pause.x < pause.x + pause.w < tl.plot_x + tl.plot_w
    html = render_html([report])
    assert html.count('<g class="band">') == 3
    assert html.count('<g class="fault">') == 3
    assert "fault 1: pause on node(s) 2\nfrom 0.500 s until 2.500 s" in html


def test_a_restarted_nodes_lane_shows_its_last_launch_until_it_began_again() -> None:
    report = happy_report()
    restarted = report.outcomes[1]
    restarted.events.append(NodeEvent(1, 0.15, "started", {"pid": 2001}))
    restarted.started, restarted.began, restarted.finished = 0.1, 0.15, 0.24
    tl = layout(report)
    launch = tl.lanes[1].launch
    assert launch is not None, "the relaunch is drawn over the node's lifeline"
    scale = tl.plot_w / tl.t_max
    assert launch.x == pytest.approx(tl.plot_x + 0.1 * scale)
    assert launch.w == pytest.approx(0.05 * scale)
    assert launch.title == "node 1: launching from 0.100 s"


def test_html_band_spans_consecutive_targeted_lanes_in_one_piece() -> None:
    tl = layout(big_report(16))
    (band,) = tl.bands
    assert band.y == tl.lanes[12].y
    assert band.y + band.h == tl.lanes[15].y + tl.lanes[15].h


def test_html_events_are_markers_with_hover_titles() -> None:
    report = happy_report()
    report.outcomes[1].events.append(NodeEvent(1, 0.1, "connect_attempt", {"error": "refused"}))
    html = render_html([report])
    assert "<title>node 1 · joined at 0.062 s\nrank=1 · joined=2</title>" in html
    assert "<title>node 1 · connect_attempt at 0.100 s\nerror=refused</title>" in html


def test_html_collapses_look_alike_lanes_of_256_nodes_and_keeps_every_lane_one_click_away() -> None:
    """Each band is a <details>: its summary is the band's lane, its body each node's own."""
    html = render_html([big_report(256)])
    assert_well_formed(html)
    collapsed = layout(big_report(256), collapse=True)
    assert [lane.label for lane in collapsed.lanes] == [
        "node 0",
        "nodes 1\N{EN DASH}191",
        "nodes 192\N{EN DASH}255",
    ]
    assert [lane.badge for lane in collapsed.lanes][1:] == [
        "timeout \N{MULTIPLICATION SIGN}191",
        "timeout \N{MULTIPLICATION SIGN}64",
    ]
    assert lanes(html) == [
        "0",
        " ".join(map(str, range(1, 192))),
        *map(str, range(1, 192)),
        " ".join(map(str, range(192, 256))),
        *map(str, range(192, 256)),
    ]
    bands = re.findall(r'<details class="band"><summary>(.*?)</summary>(.*?)</details>', html, re.S)
    assert [lanes(summary) for summary, _ in bands] == [
        [" ".join(map(str, range(1, 192)))],
        [" ".join(map(str, range(192, 256)))],
    ]
    assert [lanes(body) for _, body in bands] == [
        list(map(str, range(1, 192))),
        list(map(str, range(192, 256))),
    ]


def test_html_lanes_stay_legible_as_nodes_grow() -> None:
    assert layout(happy_report(3)).lane_h == 30
    assert layout(big_report(64)).lane_h == 13
    many = layout(big_report(256))
    assert many.lane_h >= 12 and many.font >= 9


def test_html_escapes_text_from_scenarios_and_nodes() -> None:
    report = failing_report()
    report.outcomes[3].message = "<script>alert(1)</script>"
    html = render_html([report])
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_html_is_self_contained() -> None:
    html = render_html([failing_report(), big_report(80)])
    assert not re.search(r"<script|<link|<img|<iframe|\ssrc=|url\(|@import", html)
    assert not re.search(r'href="(?!#)(?!https://github.com/)', html)


def test_nice_ticks_are_round_numbers_covering_the_run() -> None:
    assert nice_ticks(3.1) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert nice_ticks(0.25) == [0.0, 0.05, 0.1, 0.15, 0.2, 0.25]
    assert nice_ticks(95) == [0, 20, 40, 60, 80]


# --- headless Chromium ---------------------------------------------------------------


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html([failing_report(), happy_report(), big_report(256)], page, generated="now")
    width, height, raw = screenshot(page, tmp_path, 1400, 900)
    assert (width, height) == (1400, 900)
    assert len(set(raw)) > 64, "the screenshot is blank"


# --- backends: skipped runs, known breaks, node output ----------------------------------


def skipped_report() -> Report:
    sc = happy_report().scenario.on_backend("torch-static")
    return Report(sc, 7, outcomes=[], skipped="torch is not installed")


def known_break_report() -> Report:
    report = happy_report()
    report.scenario = report.scenario.on_backend("torch-static")
    report.violations = [Violation("ranks", "rank 1 was given to 2 nodes", (1, 2), known=True)]
    return report


def test_a_skipped_scenario_is_counted_and_says_why() -> None:
    text = console_text([happy_report(), skipped_report()])
    assert "1 passed, 0 failed, 0 errors, 1 skipped in 12.5 s" in text
    line = result_line(skipped_report())
    assert line.startswith("SKIP happy-three")
    assert line.endswith("(not run on torch-static: torch is not installed)")


def test_a_scenario_its_world_cannot_run_is_skipped_naming_the_world_not_the_backend() -> None:
    # The local world has no kernel packet rules: the world is the cause, not the backend
    # (the line read "not run on static: the local world cannot ...").
    scenario = parse(
        {"name": "drop-here", "description": "a test", "nodes": 2, "fault": [{"kind": "drop"}]},
        "<test>",
    )
    report = run_one(scenario, embedded_proxy, 1)
    assert report.skipped is not None and report.skipped_by_world == "local"
    line = result_line(report)
    assert "not run on static" not in line
    assert "(not run: the local world cannot drop, reject or lose packets" in line
    assert "the netns world can (world = 'netns', or --world netns))" in line
    page = render_html([report])
    assert "not run on static" not in page
    assert "not run: the local world cannot drop" in page


def test_junit_marks_a_skipped_scenario_skipped(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit([happy_report(), skipped_report()], path)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "0"
    skipped = [c for c in suite.iter("testcase") if c.find("skipped") is not None]
    assert [c.find("skipped").get("message") for c in skipped] == ["torch is not installed"]  # type: ignore[union-attr]


def test_a_known_break_passes_but_is_named_in_the_line_and_junit(tmp_path: Path) -> None:
    report = known_break_report()
    assert report.passed
    assert result_line(report).endswith("(1 known torch-static break(s))")
    path = tmp_path / "junit.xml"
    write_junit([report], path)
    case = ET.parse(path).getroot().find("testsuite/testcase")
    assert case is not None and case.find("failure") is None
    out = case.findtext("system-out") or ""
    assert "backend: torch-static" in out
    assert "known break: [ranks] rank 1 was given to 2 nodes" in out
    assert "--backend torch-static" in report.replay_command


def test_the_replay_command_names_a_world_other_than_the_local_one() -> None:
    report = known_break_report()
    assert "--world" not in report.replay_command
    report.scenario = report.scenario.in_world("netns")
    assert report.replay_command.endswith(" --world netns --backend torch-static")


def test_junit_system_out_carries_the_tail_of_each_nodes_output(tmp_path: Path) -> None:
    report = failing_report()
    report.outcomes[1].output = "".join(f"line {i}\n" for i in range(40))
    path = tmp_path / "junit.xml"
    write_junit([report], path)
    out = ET.parse(path).getroot().findtext("testsuite/testcase/system-out") or ""
    assert "output of node 1 (last 15 lines):\n  | line 25\n" in out
    assert out.count("  | line") == 15


def test_html_shows_known_breaks_apart_from_violations_and_skips_with_their_reason() -> None:
    page = render_html([known_break_report(), skipped_report()])
    assert "1 known torch-static break</h3>" in page
    assert "violations known" in page
    assert '<div class="violations"><h3>' not in page  # nothing failed
    assert "not run on torch-static: torch is not installed" in page
    assert '<span class="chip skip">1 skipped</span>' in page


# --- whether each fault acted ---------------------------------------------------------------

IDLE = (
    "fault 1 (toxic on nodes 1-2: reset_peer upstream {'timeout': 0}) did not act "
    "(in place on 2 connections, but no data reached it there)"
)


def test_console_warns_of_a_fault_that_did_not_act_without_failing_the_run() -> None:
    report = idle_fault_report()
    assert report.passed
    text = console_text([report])
    assert f"warning: reset-behind-latency: {IDLE}" in " ".join(text.split())  # unwrapped
    assert "1 passed, 0 failed, 0 errors" in text
    assert "warning:" not in console_text([failing_report()])  # every fault there acted


def test_result_line_names_the_faults_that_did_not_act() -> None:
    assert result_line(idle_fault_report()).endswith("[3 ok, 1 absent]  (fault 1 did not act)")
    assert "did not act" not in result_line(failing_report())


def test_a_failure_panel_says_what_each_fault_did() -> None:
    text = console_text([failing_report()])
    assert "fault 2 kill on nodes 1 from 1.00 s to 1.00 s; acted: 1 node killed" in text


def test_junit_flags_a_fault_that_did_not_act_in_a_property_and_in_system_out(
    tmp_path: Path,
) -> None:
    root = parse_junit([idle_fault_report(), failing_report()], tmp_path)
    assert_schema_shape(root)
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["faults_not_acting.reset-behind-latency"] == "1"
    assert "faults_not_acting.black-hole-and-kill" not in props
    case = root.find("testsuite/testcase")
    assert case is not None and case.find("failure") is None
    lines = (case.findtext("system-out") or "").splitlines()
    assert f"warning: {IDLE}" in lines
    assert (
        "fault 1 toxic on nodes 1-2 from 0.01 s to 1.00 s: reset_peer upstream {'timeout': 0}; "
        "did not act (in place on 2 connections, but no data reached it there)"
    ) in lines


def test_html_flags_a_fault_that_did_not_act_in_the_summary_its_section_and_timeline() -> None:
    html = render_html([idle_fault_report(), failing_report()])
    assert_well_formed(html)
    assert html.count('<span class="tag idle"') == 1
    assert "⚠ 1 fault did not act</span>" in html
    assert '<div class="violations idle"><h3>⚠ 1 fault did not act</h3>' in html
    assert "did not act (in place on 2 connections, but no data reached it there)" in html
    assert html.count('<rect class="idle"') == 1
    assert ">⚠ fault 1 · toxic</text>" in html
    tl = layout(idle_fault_report())
    assert [row.idle for row in tl.fault_rows] == [False, True, False, False]
    assert tl.fault_rows[1].text.endswith("did not act")
    assert not tl.fault_rows[1].text_inside  # a hollow bar cannot carry white text


def test_a_fault_that_never_fired_is_listed_with_when_it_was_due_but_not_drawn(
    tmp_path: Path,
) -> None:
    report = happy_report()
    report.faults = [
        FaultRecord(
            0, "kill", [2], 0.25, 0.25, "at 30.00 s", acted={}, fired=False,
            note="never fired: every node had ended by 0.25 s",
        )
    ]  # fmt: skip
    said = "did not act (never fired: every node had ended by 0.25 s)"
    assert report.unexpectedly_idle == report.faults
    warning = f"warning: happy-three: fault 0 (kill on nodes 2: at 30.00 s) {said}"
    assert warning in " ".join(console_text([report]).split())
    line = f"fault 0 kill on nodes 2, due at 30.00 s: {said}"
    case = parse_junit([report], tmp_path).find("testsuite/testcase")
    assert case is not None and line in (case.findtext("system-out") or "").splitlines()
    html = render_html([report])
    assert_well_formed(html)
    assert f"fault 0 · kill</span>nodes 2 · at 30.00 s: {said}</li>" in html
    assert '<td class="num">—</td><td class="msg">at 30.00 s</td>' in html
    assert layout(report).fault_rows == []  # no time to draw it at
    assert layout(report).t_max < 1  # and the axis is the run's, not stretched to 30 s


def test_html_lists_what_each_fault_did() -> None:
    html = render_html([failing_report()])
    assert "faults (3) and what each did</summary>" in html
    assert '<td class="did">1 connection black-holed</td>' in html
    assert '<td class="did">1 node paused</td>' in html
    assert "acted: 1 node killed</title>" in html


def test_late_start_and_absent_faults_appear_on_the_html_timeline_and_in_junit(
    tmp_path: Path,
) -> None:
    report = idle_fault_report()
    tl = layout(report)
    labels = [row.label for row in tl.fault_rows]
    assert labels[2:] == ["fault 2 · late_start", "fault 3 · absent"]
    late, absent = tl.bands[2:]
    assert (late.color, absent.color) == (FAULT_COLORS["late_start"], FAULT_COLORS["absent"])
    assert (late.y, absent.y) == (tl.lanes[2].y, tl.lanes[3].y)
    assert absent.open_end and not late.open_end
    html = render_html([report])
    assert "fault 2: late_start on node(s) 2\nfrom 0.000 s until 1.000 s" in html
    assert "fault 3: absent on node(s) 3\nfrom 0.000 s until the end of the run" in html
    out = parse_junit([report], tmp_path).findtext("testsuite/testcase/system-out") or ""
    assert (
        "fault 2 late_start on nodes 2 from 0.00 s to 1.00 s: start delayed by 1 s; "
        "acted: 1 node started late"
    ) in out
    assert (
        "fault 3 absent on nodes 3 from 0.00 s to the end: never started; "
        "acted: 1 node never started"
    ) in out


def hue(rgb: tuple[int, int, int]) -> float:
    return colorsys.rgb_to_hsv(*(c / 255 for c in rgb))[0] * 360


def hue_gap(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    gap = abs(hue(a) - hue(b)) % 360
    return min(gap, 360 - gap)


def test_timeout_and_connection_error_have_clearly_different_colours() -> None:
    def html_rgb(status: str) -> tuple[int, int, int]:
        code = STATUS_COLORS[status].lstrip("#")
        return int(code[0:2], 16), int(code[2:4], 16), int(code[4:6], 16)

    def console_rgb(status: str) -> tuple[int, int, int]:
        style = STATUS_STYLES[status].split()[-1]
        return tuple(Color.parse(style).get_truecolor())  # type: ignore[return-value]

    assert hue_gap(html_rgb("timeout"), html_rgb("connection_error")) >= 90
    assert hue_gap(console_rgb("timeout"), console_rgb("connection_error")) >= 90


def test_console_prints_file_and_node_text_literally() -> None:
    report = failing_report()
    report.scenario = report.scenario.model_copy(
        update={"name": "mod:factory:[bold]x[/bold]", "backend": "mod:factory"}
    )
    report.violations = [Violation("outcome", "node 1 said [red]:factory: :smile:[/red]", (1,))]
    report.error = "harness error in mod:factory: [link=x]y[/link]"
    report.faults[0].detail = "[i]latency[/i] :fire:"
    text = console_text([report])
    assert "mod:factory:[bold]x[/bold]" in text
    assert "ERROR mod:factory:[bold]x[/bold]" in text  # the panel's title
    assert "node 1 said [red]:factory: :smile:[/red]" in text
    assert "harness error in mod:factory: [link=x]y[/link]" in text
    assert "[i]latency[/i] :fire:" in text
    assert "--backend mod:factory" in text
    assert not re.search("[\U0001f300-\U0001faff]", text)  # no emoji crept in
