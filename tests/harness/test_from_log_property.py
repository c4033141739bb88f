"""Property: for a drawn scenario, running it, reading its nodes' logs back with
``from-log`` and running what comes out gives every node the same outcome class and names
the same missing ranks. Few examples (each is two real runs)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from from_log_support import missing_ranks, node_logs
from hypothesis import HealthCheck, given, settings

from harness.fuzz.strategies import scenarios
from harness.logs import convert
from harness.run.suite import run_suite
from harness.scenario.load import parse


@pytest.mark.slow
@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios(max_nodes=4, max_faults=2))
def test_a_drawn_scenarios_logs_replay_with_the_same_outcomes(data: dict[str, Any]) -> None:
    original = run_suite([parse(data, f"<{data['name']}>")])[0]
    if original.skipped:
        return
    conversion = convert(node_logs(original.outcomes), name=f"replay-{data['name']}")
    written = tomllib.loads(conversion.text)
    replay = run_suite([parse(written, "<replay>")])[0]
    before = {o.node: o.status for o in original.outcomes}
    after = {o.node: o.status for o in replay.outcomes}
    drawn = f"drawn: {data}\nwritten:\n{conversion.text}"
    assert after == before, drawn
    assert missing_ranks(replay) == missing_ranks(original), drawn
