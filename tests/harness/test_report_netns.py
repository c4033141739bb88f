"""Reports of runs in the netns world: the legend has a colour for each fault kind, the
placement says "namespace", the replay command names only what an option changed."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from report_samples import happy_report, scenario

from harness.report.glyphs import fault_color, fault_legend
from harness.report.html import render_html
from harness.scenario.faults.registry import FAULTS
from harness.world.netns import enter as netns_enter
from harness.world.process import forkserver
from harness.world.process import node as node_module


def test_the_html_legend_has_a_colour_for_every_registered_fault_kind() -> None:
    page = render_html([happy_report()])
    legend = page[page.index('<div class="legend">') : page.index('<p class="note">')]
    for kind in FAULTS.kinds():
        color = fault_color(kind)
        assert re.search(rf'background:{color};opacity:\.8"></span>{kind}</span>', legend), kind
    assert set(fault_legend()) == set(FAULTS.kinds())
    kernel = ["drop", "reject", "partition", "loss", "filter", "bandwidth"]
    assert len({fault_color(kind) for kind in kernel}) == len(kernel)


def test_a_kind_without_a_colour_of_its_own_gets_the_same_one_each_time() -> None:
    assert fault_color("meteor") == fault_color("meteor")
    assert fault_color("meteor").startswith("#")


def test_a_netns_node_reports_its_namespace_as_its_placement(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(netns_enter, "enter", lambda path: seen.setdefault("path", path))
    monkeypatch.setattr(forkserver, "redirect_output", lambda path: None)
    monkeypatch.setattr(
        forkserver, "run_node", lambda spec, reporter, hosting: seen.setdefault("hosting", hosting)
    )

    class Channel:
        def close(self) -> None:
            seen["closed"] = True

    spec = SimpleNamespace(launch=SimpleNamespace(job=None))  # a node, not a job
    netns_enter.node_entry(Channel(), str(tmp_path / "out"), "/run/netns/x", spec, None)  # type: ignore[arg-type]

    assert seen["hosting"].placement == "process in a network namespace of its own"
    assert node_module.PROCESS.placement == "process"  # the local world's nodes unchanged
    assert seen["closed"]


def test_the_replay_command_does_not_repeat_the_world_the_file_sets() -> None:
    report = happy_report()
    report.scenario = scenario("netns-file", 3, world="netns")
    assert report.replay_command == "harness run scenarios/netns-file.toml --seed 7"
    report.scenario = report.scenario.in_world("netns")  # --world netns, as the file says
    assert report.replay_command == "harness run scenarios/netns-file.toml --seed 7"
    report.scenario = report.scenario.in_world("local").on_backend("torch-static").packed(4)
    assert report.replay_command == (
        "harness run scenarios/netns-file.toml --seed 7 --world local --backend torch-static "
        "--pack 4"
    )
