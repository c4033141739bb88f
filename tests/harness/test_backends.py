"""Backends: rdzv's static handler, torch's own (``torch-static``) and a user's
``module:factory``, each run on real node processes through the harness."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest
from cli_helpers import harness

from harness.pytest_plugin import HarnessCluster
from harness.report.details import detail_lines
from harness.report.html import render_html
from harness.report.text import outcome_line
from harness.scenario.load import load
from harness.scenario.model import NAMED_BACKENDS
from harness.world.process import backends
from harness.world.process.backends import create_handler, preload, unavailable
from harness.world.process.torch_backends import Deferred

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


def test_torch_c10d_is_a_named_backend_available_exactly_when_torch_imports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "torch-c10d" in NAMED_BACKENDS
    has_torch = importlib.util.find_spec("torch") is not None
    assert (unavailable("torch-c10d") is None) == has_torch
    real = importlib.util.find_spec

    def without_torch(name: str, *args: object) -> object:
        return None if name == "torch" else real(name, *args)

    monkeypatch.setattr(backends.importlib.util, "find_spec", without_torch)
    why = unavailable("torch-c10d")
    assert why is not None
    assert why.startswith("torch is not installed (pip install -e '.[torch]'")
    # nothing of torch is preloaded into the forkserver when it cannot be imported
    assert not [m for m in preload({"torch-c10d"}) if m.startswith("torch")]


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


def test_a_node_whose_shutdown_fails_has_that_error_in_its_report(
    harness_cluster: HarnessCluster,
) -> None:
    report = harness_cluster(
        nodes=2, backend="fake_backends:stubborn", timeouts={"join": 5}, expect={"outcome": "ok"}
    )
    assert report.passed, report.violations
    for outcome in report.outcomes:
        said = f"RuntimeError: rank {outcome.node} refuses to shut down"
        assert outcome.shutdown_error == said
        assert outcome_line(outcome).endswith(f"(its shutdown failed: {said})")
    assert "its shutdown failed: RuntimeError: rank 1 refuses" in render_html([report])


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
@pytest.mark.parametrize("backend", ["torch-static", "torch-c10d"])
def test_torch_nodes_serve_on_the_harness_socket_all_join_and_the_report_names_each_rank(
    harness_cluster: HarnessCluster, backend: str
) -> None:
    pytest.importorskip("torch")
    report = harness_cluster(nodes=3, backend=backend, timeouts={"join": 20})
    assert report.passed, report.violations
    ranks = {o.node: o.rank for o in report.outcomes}
    # c10d in some order: torch ranks its nodes by host name and PID
    assert sorted(ranks.values()) == [0, 1, 2]
    assert all(o.shared_store_ok and o.world_size == 3 for o in report.outcomes)
    shown = detail_lines(report)
    for node, rank in ranks.items():
        assert any(line.startswith(f"node {node}: ok, rank {rank}, world size 3") for line in shown)


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


# --- torch's c10d rendezvous (DynamicRendezvousHandler) ------------------------------


def test_a_deferred_handler_is_built_at_its_first_rendezvous_and_only_then_shut_down() -> None:
    built: list[str] = []

    class Handler:
        def next_rendezvous(self) -> str:
            built.append("rendezvous")
            return "info"

        def shutdown(self) -> bool:
            built.append("shutdown")
            return True

    def build() -> Handler:
        built.append("built")
        return Handler()

    never = Deferred(build)
    assert never.shutdown() is False  # a node that failed before its rendezvous
    deferred = Deferred(build)
    assert built == []
    assert deferred.next_rendezvous() == "info"
    assert deferred.shutdown() is True
    assert built == ["built", "rendezvous", "shutdown"]


@pytest.mark.torch
def test_building_a_torch_c10d_node_does_not_connect_its_rendezvous_does() -> None:
    pytest.importorskip("torch")
    from torch.distributed.elastic.rendezvous import RendezvousConnectionError

    with socket.socket() as bound:  # bound, not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        endpoint = f"127.0.0.1:{bound.getsockname()[1]}"
        handler = create_handler(
            "torch-c10d", endpoint=endpoint, run_id="r", rank=1, world_size=2,
            timeout=1, config={}, listen_fd=None,
        )  # fmt: skip
        with pytest.raises(RendezvousConnectionError):
            handler.next_rendezvous()
    assert handler.shutdown() is False  # nothing was built: nothing to shut down
