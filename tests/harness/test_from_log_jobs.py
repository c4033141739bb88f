"""The round trip of the job scenarios: run each of scenarios/jobs/ on rdzv (the default
backend), read its nodes' logs back with ``from-log`` (the harness's node events, then what
the node's processes wrote: torchrun's agent lines, c10d's C++ lines, the workers'
tracebacks), run the job scenario that comes out: the same outcome class on every node,
the same agents' outcomes and restarts, the same ranks missing (nodes' ``missing ranks``,
workers' gloo keys waited for in vain).

Marked ``jobs`` (torch in every agent and worker: ``tox -e jobs``, which runs them all); J07
and J08 run in the netns world and are marked ``netns`` too (root and nft; skipped without
them), each removing the namespaces it made, also on failure. The original run must pass
its own expectations (a shipped job scenario passes on its default backend: this is where
``tox -e jobs`` checks that on rdzv).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest
from from_log_support import assert_same_symptom, no_namespace_left, round_trip

from harness.world.netns.shell import why_not

ROOT = Path(__file__).resolve().parents[2]
JOBS = sorted((ROOT / "scenarios" / "jobs").glob("J*.toml"))
NETNS = {"J07", "J08"}
NO_TORCH = importlib.util.find_spec("torch") is None


@pytest.mark.jobs
@pytest.mark.skipif(NO_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("path", [p for p in JOBS if p.stem[:3] not in NETNS], ids=lambda p: p.stem)
def test_a_job_scenarios_logs_replay_as_a_job_with_the_same_outcomes(
    path: Path, tmp_path: Path
) -> None:
    original, replay, text = round_trip(path, tmp_path)
    assert original.passed, f"{path.name} failed on rdzv: {original.violations}"
    assert "[job]" in text, text
    assert_same_symptom(original, replay, text)


@pytest.fixture
def _no_namespace_left() -> Iterator[None]:
    with no_namespace_left():
        yield


@pytest.mark.jobs
@pytest.mark.netns
@pytest.mark.skipif(NO_TORCH, reason="torch is not installed")
@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
@pytest.mark.usefixtures("_no_namespace_left")
@pytest.mark.parametrize("path", [p for p in JOBS if p.stem[:3] in NETNS], ids=lambda p: p.stem)
def test_a_netns_job_scenarios_logs_replay_in_the_netns_world_with_the_same_outcomes(
    path: Path, tmp_path: Path
) -> None:
    original, replay, text = round_trip(path, tmp_path)
    assert original.passed, f"{path.name} failed on rdzv: {original.violations}"
    assert "[job]" in text and 'world = "netns"' in text, text
    assert_same_symptom(original, replay, text)
