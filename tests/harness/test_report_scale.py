"""Reports of 1024 and 4096 nodes: the console and JUnit fold look-alike nodes, the HTML
page folds them into bands, every node stays reachable, the page stays under 5 MB."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from chromium import CHROMIUM, screenshot
from report_samples import (
    big_report,
    failing_report,
    noisy_straggler_report,
    scale_report,
    straggler_report,
)
from rich.console import Console
from test_report import assert_well_formed, lanes, parse_junit

from harness.report.console import FOLDS_SHOWN, print_summary
from harness.report.fold import mask, outcome_folds, placement_line, short_ranges, violation_folds
from harness.report.html import render_html, write_html
from harness.report.junit import OUTPUTS_SHOWN, write_junit
from harness.report.text import outcome_line
from harness.report.timeline import MAX_LANES, layout
from harness.run.model import NodeEvent, NodeOutcome, Report, Violation

STRAGGLER = 4096 * 2 // 3  # the straggler's node in the 4096-node samples


def console_text(reports: list[Report], width: int = 160) -> str:
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    print_summary(reports, console, wall=12.5)
    return console.export_text()


def placed(report: Report) -> Report:
    for o in report.outcomes:
        o.placement = "process" if o.node == 0 else "packed 512 per process (threads)"
    return report


# --- folding -------------------------------------------------------------------------


def test_mask_hides_only_the_nodes_own_number() -> None:
    assert mask("node 1's message: rank 1 of node 12", 1) == "node N's message: rank N of node 12"
    assert mask("node 3 took 3.0 s; node 3.5", 3) == "node N took 3.0 s; node 3.5"
    assert mask("rank 7 (node 2)", 2, rank=7) == "rank N (node N)"


def test_short_ranges_keep_the_first_runs_and_the_last() -> None:
    assert short_ranges(range(0, 4096)) == "0-4095"
    assert short_ranges([1, 2, 5, 9]) == "1-2, 5, 9"
    assert short_ranges(range(0, 40, 2)) == "0, 2, 4, 6, 8, 10, 12, \N{HORIZONTAL ELLIPSIS}, 38"


def test_folds_account_for_every_node_exactly_once() -> None:
    report = straggler_report(4096)
    folds = outcome_folds(report.outcomes, outcome_line)
    nodes = [n for fold in folds for n in fold.nodes]
    assert sorted(nodes) == list(range(4096))
    assert [len(f.nodes) for f in folds] == [4090, 5, 1]
    violations = violation_folds(report.problems)
    assert sorted(n for fold in violations for n in fold.nodes) == list(range(4096))
    assert len(violations) == 3


# --- console -------------------------------------------------------------------------


def test_a_failing_4096_node_run_prints_a_screenful_not_4096_lines() -> None:
    assert len(console_text([straggler_report(4096)]).splitlines()) < 40
    flat = console_text([straggler_report(4096)], width=400)  # no wrapped lines
    assert len(flat.splitlines()) < 25
    assert not re.search(r"node \d+ ended 'timeout'", flat)
    assert (
        "[outcome] node N ended 'timeout', expected 'ok': rdzv.errors.RendezvousTimeoutError: "
        "rendezvous round 0 timed out after 8.0 s: 4095 of 4096 nodes joined; missing ranks: "
        f"{STRAGGLER}  (4090 nodes: 0-260, 262-516, 518-772, 774-1028, 1030-1284, "
        f"1286-{STRAGGLER - 1}, {STRAGGLER + 1}-4095)" in flat
    )
    # the one distinct node is shown in full, with its own number
    assert f"[outcome] node {STRAGGLER} ended 'connection_error', expected 'ok'" in flat
    assert f"node {STRAGGLER}: connection_error, after 5.435 s" in flat
    assert "(4090): timeout, after 1.95-7.95 s" in flat
    assert "nodes 261, 517, 773, 1029, 1285 (5): killed" in flat


def words(n: int) -> str:
    """``n`` spelt in letters (``12`` -> ``bc``): a word that no number abstraction folds."""
    return "".join(chr(ord("a") + int(d)) for d in str(n))


def test_a_failure_panel_shows_a_bounded_number_of_distinct_violations() -> None:
    report = straggler_report(1024)
    report.violations = [
        Violation("elapsed", f"node {n} took long ({words(n)}), expected within 1 s", (n,))
        for n in range(1024)
    ]
    text = console_text([report])
    shown = re.findall(r"\[elapsed\] node \d+ took", text)
    assert len(shown) == FOLDS_SHOWN
    assert f"... and {1024 - FOLDS_SHOWN} more ({1024 - FOLDS_SHOWN} nodes)" in text
    assert len(text.splitlines()) < 50


def test_violations_that_differ_only_by_numbers_are_one_line_with_their_ranges() -> None:
    report = straggler_report(1024)
    report.violations = [
        Violation("elapsed", f"node {n} took {1 + n / 1000:.3f}s, expected within [0, 1] s", (n,))
        for n in range(1024)
    ]
    text = console_text([report], width=400)
    assert (
        "[elapsed] node N took 1.000\N{EN DASH}2.023s, expected within [0, 1] s  "
        "(1024 nodes: 0-1023)" in text
    )
    assert "more (" not in text


def test_a_1024_node_failure_whose_messages_differ_by_pid_port_and_wait_is_a_few_lines() -> None:
    text = console_text([noisy_straggler_report(1024)], width=400)
    lines = text.splitlines()
    assert len(lines) < 30
    assert "more (" not in text  # no "... and 1011 more": every look-alike is in a group
    assert len([line for line in lines if "[outcome] node N ended 'timeout'" in line]) == 1
    assert "1023 of 1024 nodes joined; missing ranks: 682" in text  # said alike: as it is
    assert re.search(r"pid 4000\N{EN DASH}11161, .*from port \d+\N{EN DASH}\d+", text)
    assert re.search(
        r"waited 7\.\d\d\N{EN DASH}[78]\.\d\d s for round/0/done  \(1018 nodes: ", text
    )
    assert re.search(r"\(1018\): timeout, after [\d.]+-[\d.]+ s", text)  # one outcome group


def test_junit_and_html_of_a_noisy_1024_node_failure_fold_into_a_few_groups(
    tmp_path: Path,
) -> None:
    report = noisy_straggler_report(1024)
    page = render_html([report])
    # the violation, the node table's row, and a band or two of the timeline: not 1018
    assert page.count("waited 7.") < 10
    # the numbers in 1018 messages cost next to nothing: each node's lane drops its message
    assert len(page) < 1.05 * len(render_html([straggler_report(1024)]))
    write_junit([report], tmp_path / "junit.xml")
    xml = (tmp_path / "junit.xml").read_text()
    assert xml.count("waited 7.") <= 3  # message summary, violation line, outcome group
    assert len(xml) < 200_000


def test_a_timeline_band_of_nodes_that_said_different_things_names_how_many_said_its_words(
    tmp_path: Path,
) -> None:
    # The S02 shape: most nodes name the missing rank, some could not determine it. They
    # ended alike (same status, error and events), so the timeline draws them as one band,
    # but their messages hold different counts of numbers.
    report = noisy_straggler_report(1024)
    odd = [o for o in report.outcomes if o.status == "timeout"][-100:]
    for o in odd:
        o.message = "rendezvous round 0 timed out: which ranks are missing could not be determined"
    page = render_html([report])
    band = re.search(r"\((\d+) of (\d+) nodes said this; the others other things\)", page)
    assert band, "the band's message must say how many of its nodes said it"
    assert int(band[2]) - int(band[1]) == len(odd)
    write_junit([report], tmp_path / "junit.xml")
    assert "could not be determined" in (tmp_path / "junit.xml").read_text()


def test_small_failures_keep_each_node_in_its_own_words() -> None:
    text = console_text([failing_report()])
    assert "[outcome] node 1 ended 'killed', expected 'timeout'  (node 1)" in text
    assert "node 1: killed, rank 1, world size 4, after 0.975 s" in text
    assert "nodes 0, 2 (2): timeout, rank = node, world size 4" in text


# --- JUnit ---------------------------------------------------------------------------


def test_junit_of_4096_nodes_folds_node_lines_and_output_tails(tmp_path: Path) -> None:
    report = straggler_report(4096)
    for o in report.outcomes:
        o.output = "rdzv: slow store\n" * 3 if o.node % 2 else f"pid {o.node % 11}\n"
    report.outcomes[STRAGGLER].output = "Traceback: boom\n"
    root = parse_junit([report], tmp_path)
    case = root.find("testsuite/testcase")
    assert case is not None
    (case_out,) = case.findall("system-out")
    out = case_out.text or ""
    assert len(out) < 8000
    node_lines = [x for x in out.splitlines() if re.match(r"nodes? [\d,]", x)]
    assert len(node_lines) == 3
    assert node_lines[0].startswith("nodes 0-260, 262-516") and "(4090): timeout" in node_lines[0]
    heads = [x for x in out.splitlines() if x.startswith("output of")]
    assert len(heads) == OUTPUTS_SHOWN + 1
    # 13 distinct tails, every node named by a violation: the rarest first (the straggler's)
    assert heads[0] == f"output of node {STRAGGLER} (last 1 lines):"
    tails = {x.removeprefix("  | ") for x in out.splitlines() if x.startswith("  | ")}
    shown = sum(1 for o in report.outcomes if (o.output or "").splitlines()[-1] in tails)
    assert heads[-1] == f"output of {4096 - shown} more node(s) not shown (5 distinct)"
    failure = case.find("failure")
    assert failure is not None and failure.text is not None
    assert len(failure.text.splitlines()) == 5  # 3 distinct violations, seed, replay
    assert "(nodes 261, 517, 773, 1029, 1285 (5))" in failure.text


def test_junit_of_a_small_run_keeps_one_line_per_node(tmp_path: Path) -> None:
    root = parse_junit([big_report(64)], tmp_path)
    out = root.find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    assert len([x for x in out.text.splitlines() if x.startswith("node ")]) == 64


def test_a_failed_pytest_item_of_4096_nodes_shows_folded_lines() -> None:
    from harness.report.failure import failure_text

    report = straggler_report(4096)
    for o in report.outcomes:
        o.output = f"tail of {o.status}\n"
    text = failure_text(report)
    lines = text.splitlines()
    assert len(lines) < 30
    assert "  nodes 261, 517, 773, 1029, 1285 (5): [outcome] node N ended 'killed'" in text
    assert re.search(rf"\n  node {STRAGGLER}: connection_error after 5\.4\d s: rdzv\.", text)
    killed = "nodes 261, 517, 773, 1029, 1285 (5)"
    assert f"  output of {killed} (last 1 lines, the same on each):" in lines
    assert len([x for x in lines if x.startswith("  output of")]) == 3  # one per distinct tail
    small = failure_text(failing_report()).splitlines()
    assert "  [outcome] node 1 ended 'killed', expected 'timeout'" in small
    assert "  node 1: killed rank 1 after 0.97 s: message: killed by the harness (SIGKILL)" in small


# --- placement -----------------------------------------------------------------------


def test_placement_is_one_line_per_run_in_every_report(tmp_path: Path) -> None:
    report = placed(scale_report(4096, expect_ok_everywhere=True))
    line = "node 0: process; nodes 1-4095: packed 512 per process (threads)"
    assert placement_line(report.outcomes) == line
    assert f"placement {line}" in console_text([report])
    out = parse_junit([report], tmp_path).find("testsuite/testcase/system-out")
    assert out is not None and out.text is not None
    assert f"placement: {line}" in out.text.splitlines()
    html = render_html([report])
    assert f"<b>placement</b> {line}</p>" in html
    # each node's own lane says where it ran
    assert re.search(r"node 7: ok [\d.]+ s\nrank 7 · packed 512 per process \(threads\)\n", html)


def test_no_placement_line_when_the_world_says_nothing(tmp_path: Path) -> None:
    report = scale_report(256, expect_ok_everywhere=True)
    assert placement_line(report.outcomes) is None
    assert "placement" not in console_text([report])
    assert '<p class="placement">' not in render_html([report])


def test_an_absent_node_is_placed_nowhere_rather_than_not_said() -> None:
    outcomes = [NodeOutcome(n, "ok", placement="process") for n in (0, 1, 3)]
    outcomes.append(NodeOutcome(2, "absent"))
    assert placement_line(outcomes) == "nodes 0-1, 3 (3): process; node 2: never started"


def test_many_placements_are_capped() -> None:
    report = scale_report(256)
    for o in report.outcomes:
        o.placement = f"packed {o.node // 32}/8 (thread)"
    line = placement_line(report.outcomes)
    assert line is not None
    assert line.startswith("nodes 0-31: packed 0/8 (thread); nodes 32-63: packed 1/8 (thread)")
    assert line.endswith("; 2 more placements on 64 nodes")


# --- HTML ----------------------------------------------------------------------------


def test_html_of_4096_nodes_is_under_5_mb_with_a_few_bands_and_every_node_reachable() -> None:
    html = render_html([scale_report(4096)])
    assert len(html.encode()) < 5_000_000
    assert_well_formed(html)
    bands = re.findall(r'<details class="band"><summary>(.*?)</summary>(.*?)</details>', html, re.S)
    top = [x for x in lanes(html) if " " in x or x in ("0", str(STRAGGLER))]
    assert len(top) == 4  # node 0, the ok nodes, the killed ones, the straggler
    assert len(bands) == 2
    own = [x for x in lanes(html) if " " not in x]
    assert sorted(map(int, own)) == list(range(4096))  # every node has its own lane once
    ok, killed = (lanes(body) for _, body in bands)
    assert len(ok) == 4089 and killed == ["261", "517", "773", "1029", "1285"]
    assert "nodes 1\N{HORIZONTAL ELLIPSIS}4095" in bands[0][0]
    assert "ok \N{MULTIPLICATION SIGN}4089" in bands[0][0]


def test_html_node_lane_titles_carry_rank_and_every_event_time() -> None:
    html = render_html([scale_report(1024)])
    (title,) = re.findall(r'data-nodes="517" transform="[^"]*"><title>([^<]*)</title>', html)
    assert title.startswith("node 517: ok ")
    assert "\nrank 517\nstarted " in title
    for event in ("connect_attempt", "connected", "join_start", "joined", "complete", "shutdown"):
        assert re.search(rf"{event} \d+\.\d{{3}}", title), event


def test_html_bands_gather_look_alike_nodes_wherever_they_are() -> None:
    report = big_report(256)
    for o in report.outcomes[1::2]:  # every other node: one more kind of event
        o.events.insert(1, NodeEvent(o.node, o.events[0].t + 0.001, "dns_lookup"))
    tl = layout(report, collapse=True)
    assert [lane.label for lane in tl.lanes] == [
        "node 0",
        "nodes 1\N{HORIZONTAL ELLIPSIS}191",
        "nodes 2\N{HORIZONTAL ELLIPSIS}190",
        "nodes 192\N{HORIZONTAL ELLIPSIS}254",
        "nodes 193\N{HORIZONTAL ELLIPSIS}255",
    ]
    assert tl.lanes[1].members is not None
    assert [m.nodes for m in tl.lanes[1].members.lanes] == [(n,) for n in range(1, 192, 2)]


def test_html_judges_look_alike_more_coarsely_rather_than_draw_too_many_lanes() -> None:
    report = big_report(256)
    for o in report.outcomes:  # 64 different stories by their kinds of events
        o.events.insert(1, NodeEvent(o.node, o.events[0].t + 0.001, f"custom_{o.node % 64}"))
    tl = layout(report, collapse=True)
    assert sorted(n for lane in tl.lanes for n in lane.nodes) == list(range(256))
    assert MAX_LANES < 64  # so without the events: split by the link-down fault only
    assert [lane.label for lane in tl.lanes] == [
        "nodes 0\N{EN DASH}191",
        "nodes 192\N{EN DASH}255",
    ]


def test_html_folds_the_node_table_and_violations_of_a_large_run() -> None:
    html = render_html([straggler_report(4096)])
    table = html.split("<summary>node outcomes (", 1)[1]
    rows = re.findall(r"<tr(?: class=\"flagged\")?><td class=\"num\">([^<]*)</td>", table)
    assert rows == [
        "0-260, 262-516, 518-772, 774-1028, 1030-1284, 1286-2729, 2731-4095 (4090)",
        "261, 517, 773, 1029, 1285 (5)",
        str(STRAGGLER),
    ]
    assert "4096 nodes in 3 rows" in html
    assert html.count('<span class="check">outcome</span>') == 3
    assert "node N ended &#39;timeout&#39;, expected &#39;ok&#39;" in html


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
def test_a_4096_node_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    write_html([straggler_report(4096), scale_report(4096)], page, generated="now")
    width, height, raw = screenshot(page, tmp_path, 1400, 1400)
    assert (width, height) == (1400, 1400)
    assert len(set(raw)) > 64, "the screenshot is blank"
    ET.fromstring(re.findall(r"<svg\b.*?</svg>", page.read_text())[-1])
