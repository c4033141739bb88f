"""Every scenario file in scenarios/ runs as a test: a scenario that breaks fails CI."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.model import Report
from harness.runner import run_scenario
from harness.scenario import load
from harness.toxiproxy_api import ToxiproxyServer
from harness.toxiproxy_client import ToxiproxyClient

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[ToxiproxyClient]:
    with ToxiproxyServer() as server:
        yield ToxiproxyClient(server.host, server.port)


def explain(report: Report) -> str:
    lines = [f"{report.scenario.name}: seed {report.seed}; replay: {report.replay_command}"]
    lines += [f"  [{v.check}] {v.message}" for v in report.violations]
    lines += [
        f"  node {o.node}: {o.status} after {o.elapsed or 0:.2f}s: {o.message or ''}"
        for o in report.outcomes
    ]
    return "\n".join(lines)


def test_the_scenario_directory_has_at_least_twelve_scenarios() -> None:
    assert len(SCENARIOS) >= 12


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario(path: Path, toxiproxy: ToxiproxyClient) -> None:
    report = run_scenario(load(path), toxiproxy)
    assert report.passed, explain(report)
