"""Backends: rdzv's static handler, torch's own (``torch-static``) and a user's
``module:factory``, each run on real node processes through the harness."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from cli_helpers import harness

from harness.pytest_plugin import HarnessCluster
from harness.scenario.load import load
from harness.world.process.backends import unavailable

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_the_static_backend_is_always_available() -> None:
    assert unavailable("static") is None


def test_a_factory_in_a_missing_module_is_unavailable_and_says_so() -> None:
    why = unavailable("no_such_module_xyz:make")
    assert why is not None
    assert why.startswith("no module named 'no_such_module_xyz' (backend 'no_such_module_xyz:")
    assert why.endswith("is it on PYTHONPATH?")


def test_torch_static_availability_follows_whether_torch_is_installed() -> None:
    if importlib.util.find_spec("torch") is None:
        assert "torch is not installed" in (unavailable("torch-static") or "")
    else:
        assert unavailable("torch-static") is None


def test_a_user_factory_backend_runs_and_the_invariants_judge_it(
    harness_cluster: HarnessCluster,
) -> None:
    # fake_backends:eager returns without a join barrier: with node 2 absent, nodes 0 and 1
    # return anyway, which the complete_round invariant catches.
    report = harness_cluster(
        nodes=3,
        backend="fake_backends:eager",
        timeouts={"join": 3},
        fault=[{"kind": "absent", "nodes": [2]}],
        expect={"outcome": "timeout", "nodes": [{"nodes": [2], "outcome": "absent"}]},
    )
    checks = {v.check for v in report.problems}
    assert "complete_round" in checks, report.violations
    returned = sorted(o.rank for o in report.outcomes if o.rank is not None)
    assert returned == [0, 1]


def test_what_a_node_prints_is_kept_in_its_outcome_not_on_the_terminal(
    harness_cluster: HarnessCluster,
) -> None:
    report = harness_cluster(
        nodes=2, backend="noisy_backend:noisy", timeouts={"join": 3}, expect={"outcome": "error"}
    )
    assert report.passed, report.violations
    for outcome in report.outcomes:
        assert outcome.message == f"noisy rank {outcome.node} refuses to rendezvous"
        output = outcome.output or ""
        assert f"noisy rank {outcome.node} says hello on stdout" in output
        assert f"noisy rank {outcome.node} writes to fd 2 directly" in output
        assert f"noisy rank {outcome.node} gives up" in output


def test_run_rejects_an_unknown_backend_as_a_usage_error() -> None:
    result = harness("run", "scenarios/happy-path.toml", "--backend", "bogus", cwd=REPO)
    assert result.returncode == 2
    assert "--backend: unknown backend 'bogus'" in result.stderr


def test_run_skips_scenarios_a_backend_cannot_run_says_why_and_is_not_a_success() -> None:
    result = harness(
        "run", "scenarios/happy-path.toml", "--backend", "no_such_module_xyz:make", cwd=REPO
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "SKIP happy-path" in result.stdout
    assert "no module named 'no_such_module_xyz'" in result.stdout
    assert "0 passed, 0 failed, 0 errors, 1 skipped" in result.stdout
    assert "nothing ran: every scenario was skipped" in result.stderr


# --- torch's own static rendezvous ---------------------------------------------------


@pytest.mark.torch
@pytest.mark.long  # torch's first import in the forkserver: tens of seconds on 2 cores
def test_torch_static_serves_on_the_harness_socket_and_every_node_joins(
    harness_cluster: HarnessCluster,
) -> None:
    pytest.importorskip("torch")
    report = harness_cluster(nodes=3, backend="torch-static", timeouts={"join": 20})
    assert report.passed, report.violations
    assert sorted(o.rank for o in report.outcomes) == [0, 1, 2]
    assert all(o.shared_store_ok for o in report.outcomes)


@pytest.mark.torch
@pytest.mark.long  # F25 on torch-static, which `tox -e torch` also runs as a scenario
def test_torch_static_hands_out_a_duplicate_rank_which_the_file_records_as_known() -> None:
    pytest.importorskip("torch")
    from harness.run.suite import embedded_proxy, run_one

    scenario = load(REPO / "scenarios" / "F25-duplicate-rank.toml").on_backend("torch-static")
    report = run_one(scenario, embedded_proxy, 2501)
    assert report.passed, report.problems
    known = {v.check for v in report.violations if v.known}
    assert known == {"ranks", "complete_round"}
    ranks = sorted(o.rank for o in report.outcomes if o.rank is not None)
    assert ranks == [0, 1, 1, 2]
