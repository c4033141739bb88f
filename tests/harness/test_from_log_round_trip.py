"""The round trip: run a shipped scenario, read its nodes' logs back with ``from-log``, run
what comes out: the same outcome class on every node and the same missing ranks.

The nodes' logs are what each node would print with logging configured (rdzv's events in
torch's bracketed-date format, the traceback's last line; :mod:`from_log_support`). The
whole suite of shipped scenarios (not the scale ones: scenarios/scale/, nor the netns
world's: scenarios/netns/, whose round trip is test_from_log_netns.py) is marked ``long``;
a fast subset runs by default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from from_log_support import assert_same_symptom, round_trip

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.toml"))
FAST = {"F03-node-never-arrives.toml", "F28-black-hole-link.toml"}


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
