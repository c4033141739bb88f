"""Random scenarios on real node processes keep every invariant and the oracle; the fuzz
loop shrinks a failure and writes it as a scenario file."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, note, settings

from harness.errors import ScenarioError
from harness.fuzz.loop import fuzz, on_backend, replay
from harness.fuzz.strategies import scenarios
from harness.run.model import Report, Violation
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import load, parse
from harness.scenario.model import Scenario


@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(scenarios(max_nodes=4, max_join=2.5, max_faults=2))
def test_random_fault_schedules_break_no_invariant_and_meet_the_oracle(
    data: dict[str, Any],
) -> None:
    note(tomli_w.dumps(data))
    report = run_one(parse(data, "<generated>"), embedded_proxy, data["seed"])
    assert report.error is None, report.error
    assert report.problems == [], [f"{v.check}: {v.message}" for v in report.problems]


# --- the fuzz loop, with a stand-in runner (no processes) -------------------------------


def fails_when_a_node_is_absent(scenario: Scenario, seed: int) -> Report:
    """A pretend rendezvous that lets nodes succeed without a missing rank."""
    report = Report(scenario, seed, outcomes=[])
    if any(f.kind == "absent" for f in scenario.fault):
        report.violations = [Violation("complete_round", "succeeded with a rank missing")]
    return report


def test_fuzz_shrinks_a_failure_to_a_minimal_scenario_file(tmp_path: Path) -> None:
    lines: list[str] = []
    result = fuzz(
        50, 5, tmp_path, lines.append, runner=fails_when_a_node_is_absent, max_shrinks=500
    )
    assert result.failures == 1 and len(result.written) == 1
    written = result.written[0]
    scenario = load(written)
    assert [f.kind for f in scenario.fault] == ["absent"]
    assert scenario.nodes == 2 and scenario.override == []
    assert "harness fuzz --seed 5" in scenario.description
    assert "Failed checks: complete_round. First problem: succeeded" in scenario.description
    with open(written, "rb") as handle:
        assert tomllib.load(handle)["seed"] == scenario.seed
    assert any(line.startswith("[1/50] ") for line in lines)
    assert any("FAIL (complete_round" in line for line in lines)
    assert lines[-1].endswith(f"replay: harness replay {written})")


def test_fuzz_still_writes_a_failure_that_passes_when_run_again_and_says_so(
    tmp_path: Path,
) -> None:
    runs: Counter[str] = Counter()

    def fails_once(scenario: Scenario, seed: int) -> Report:
        runs[scenario.name] += 1
        if runs[scenario.name] == 1:
            return fails_when_a_node_is_absent(scenario, seed)
        return Report(scenario, seed, outcomes=[])

    lines: list[str] = []
    result = fuzz(30, 5, tmp_path, lines.append, runner=fails_once)
    assert result.flaky and len(result.written) == 1
    assert load(result.written[0]).fault[0].kind == "absent"
    assert lines[-1].endswith("it passed once when run again: the failure depends on timing")


def test_fuzz_writes_a_larger_failure_that_fails_again_when_the_minimal_one_passes(
    tmp_path: Path,
) -> None:
    # Every failure depends on timing but the first one found: it fails on every run.
    runs: Counter[str] = Counter()
    first: list[str] = []

    def only_the_first_fails_for_good(scenario: Scenario, seed: int) -> Report:
        runs[scenario.name] += 1
        report = fails_when_a_node_is_absent(scenario, seed)
        if report.violations and not first:
            first.append(scenario.name)
        if runs[scenario.name] > 1 and scenario.name not in first:
            return Report(scenario, seed, outcomes=[])
        return report

    lines: list[str] = []
    result = fuzz(30, 5, tmp_path, lines.append, runner=only_the_first_fails_for_good)
    assert result.confirmed and not result.flaky
    assert [load(path).name for path in result.written] == first
    confirms = [line for line in lines if line.startswith("[confirm] ")]
    assert confirms[-1].startswith(f"[confirm] {first[0]} ") and "FAIL" in confirms[-1]
    assert lines[-1].endswith("the file is the smallest that failed again")


def test_fuzz_reports_no_failure_and_writes_nothing_when_every_run_passes(
    tmp_path: Path,
) -> None:
    def passes(scenario: Scenario, seed: int) -> Report:
        return Report(scenario, seed, outcomes=[])

    lines: list[str] = []
    result = fuzz(12, 1, tmp_path / "out", lines.append, backend="pkg.mod:make", runner=passes)
    assert (result.failures, result.written) == (0, [])
    assert not (tmp_path / "out").exists()
    assert 1 <= result.examples <= 12
    assert lines[-1] == f"fuzz: seed 1: {result.examples} scenario(s) run; no failure found"


def test_fuzz_gives_every_scenario_the_requested_backend(tmp_path: Path) -> None:
    seen: set[str] = set()

    def record(scenario: Scenario, seed: int) -> Report:
        seen.add(scenario.backend)
        return Report(scenario, seed, outcomes=[])

    fuzz(5, 2, tmp_path, lambda line: None, backend="fake_backends:eager", runner=record)
    assert seen == {"fake_backends:eager"}


def test_on_another_backend_the_oracle_keeps_outcomes_and_bounds_but_not_rdzvs_wording() -> None:
    data: dict[str, Any] = {
        "name": "moved",
        "description": "d",
        "nodes": 2,
        "fault": [{"kind": "absent", "nodes": [1]}],
        "expect": {
            "outcome": "timeout",
            "nodes": [{"nodes": [0], "outcome": "timeout", "message": "gone", "elapsed": [0, 9]}],
        },
    }
    moved = on_backend(data, "torch-static")
    assert moved["backend"] == "torch-static"
    assert moved["expect"]["nodes"] == [{"nodes": [0], "outcome": "timeout", "elapsed": [0, 9]}]
    assert on_backend(data, "static")["expect"] == data["expect"]
    parse(moved, "<moved>")


def test_fuzz_rejects_a_budget_below_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="budget must be at least 1 scenario, got 0"):
        fuzz(0, 1, tmp_path, lambda line: None)


def test_replay_refuses_a_file_without_a_seed(tmp_path: Path) -> None:
    path = tmp_path / "unseeded.toml"
    path.write_text('name = "unseeded"\ndescription = "No seed."\nnodes = 2\n', encoding="utf-8")
    with pytest.raises(ScenarioError, match="records no seed; give one with --seed N"):
        replay(path)


def test_fuzz_keeps_every_drawn_scenario_when_asked_though_none_failed(tmp_path: Path) -> None:
    def passes(scenario: Scenario, seed: int) -> Report:
        return Report(scenario, seed, outcomes=[])

    lines: list[str] = []
    result = fuzz(6, 3, tmp_path / "out", lines.append, runner=passes, keep=tmp_path / "kept")
    assert result.written == [] and not (tmp_path / "out").exists()
    assert len(result.kept) == result.examples >= 1
    assert sorted(result.kept) == sorted((tmp_path / "kept").glob("*.toml"))
    for path in result.kept:
        scenario = load(path)  # a scenario file `harness run` runs again, seed and all
        assert scenario.seed is not None
        assert scenario.description.startswith("Drawn by `harness fuzz --seed 3`: ")
        assert scenario.description.endswith("; it passed.")
    kept = f"{result.examples} drawn scenario(s) kept in {tmp_path / 'kept'}"
    assert lines[-1].endswith(f"run; {kept}; no failure found")


def test_the_replay_command_of_a_factory_backend_sets_pythonpath_as_fuzz_says(
    tmp_path: Path,
) -> None:
    here = Path(__file__).resolve().parent  # where fake_backends imports from
    data = {
        "name": "factory",
        "description": "d",
        "nodes": 2,
        "backend": "fake_backends:eager",
        "backends": {"fake_backends:eager": {"unsupported": "not run by this test"}},
    }
    report = run_one(parse(data, "found/factory.toml"), embedded_proxy, 5)
    assert report.replay_command == (f"PYTHONPATH={here} harness run found/factory.toml --seed 5")

    def fails_as_run_one_reports(scenario: Scenario, seed: int) -> Report:
        failed = fails_when_a_node_is_absent(scenario, seed)
        failed.rerun_env = report.rerun_env
        return failed

    lines: list[str] = []
    backend = "fake_backends:eager"
    result = fuzz(30, 5, tmp_path, lines.append, backend, runner=fails_as_run_one_reports)
    assert result.reports[0].replay_command.startswith(f"PYTHONPATH={here} harness ")
    path = result.written[0]
    said = f"(run it: PYTHONPATH={here} harness run {path}; replay: PYTHONPATH={here} harness"
    assert said in lines[-1]
