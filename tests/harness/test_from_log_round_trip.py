"""The round trip: run a shipped scenario, read its nodes' logs back with ``from-log``, run
what comes out: the same outcome class on every node and the same missing ranks.

The nodes' logs are what each node would print with logging configured (rdzv's events in
torch's bracketed-date format, the traceback's last line; :mod:`from_log_support`). The
whole suite of shipped scenarios (not the scale ones: scenarios/scale/, nor the netns
world's: scenarios/netns/) is marked ``long``; a fast subset runs by default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from from_log_support import missing_ranks, node_logs

from harness.logs import convert
from harness.run.model import Report
from harness.run.suite import run_suite
from harness.scenario.load import load

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))
FAST = {"F03-node-never-arrives.toml", "F28-black-hole-link.toml"}


def round_trip(path: Path, tmp_path: Path) -> tuple[Report, Report, str]:
    original = run_suite([load(path)])[0]  # its symptom is what it did, passed or not
    assert original.error is None and not original.skipped, original.error or original.skipped
    conversion = convert(node_logs(original.outcomes), name=f"replay-{path.stem.lower()}")
    written = tmp_path / f"replay-{path.stem}.toml"
    written.write_text(conversion.text, encoding="utf-8")
    replay = run_suite([load(written)])[0]
    return original, replay, conversion.text


def assert_same_symptom(original: Report, replay: Report, text: str) -> None:
    before = {o.node: o.status for o in original.outcomes}
    after = {o.node: o.status for o in replay.outcomes}
    assert after == before, f"outcomes differ; the scenario was:\n{text}"
    assert missing_ranks(replay) == missing_ranks(original), text
    assert replay.passed, f"{replay.violations}\n{text}"


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SHIPPED if p.name in FAST], ids=lambda p: p.stem)
def test_a_shipped_scenarios_logs_replay_with_the_same_outcomes(path: Path, tmp_path: Path) -> None:
    assert_same_symptom(*round_trip(path, tmp_path))


@pytest.mark.long
@pytest.mark.parametrize("path", [p for p in SHIPPED if p.name not in FAST], ids=lambda p: p.stem)
def test_every_shipped_scenarios_logs_replay_with_the_same_outcomes(
    path: Path, tmp_path: Path
) -> None:
    assert_same_symptom(*round_trip(path, tmp_path))
