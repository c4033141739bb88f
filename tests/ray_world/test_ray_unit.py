"""The Ray world's parts that need no running Ray: grouping, the world key, Ray missing."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sys
import textwrap
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import ROOT, built

from harness.cli.common import nothing_ran
from harness.errors import ScenarioError
from harness.run.suite import embedded_proxy, run_one, run_suite, worlds_session
from harness.world.ray import session
from harness.world.ray.groups import default_pack, plan


def test_node_0_is_alone_and_the_others_are_packed_in_node_order() -> None:
    groups = plan(8, 3)

    assert [list(g.nodes) for g in groups] == [[0], [1, 2, 3], [4, 5, 6], [7]]
    assert [g.whole for g in groups] == [True, False, False, True]


def test_without_a_pack_small_runs_get_an_actor_per_node_and_large_ones_16_groups() -> None:
    assert default_pack(8, None) == 1
    assert default_pack(17, None) == 1
    assert default_pack(1024, None) == 64
    assert len(plan(1024, default_pack(1024, None))) == 17
    assert default_pack(1024, 8) == 8


def test_a_scenario_names_its_world_and_an_unknown_world_is_refused_by_key() -> None:
    assert built({"name": "w", "nodes": 2, "world": "ray"}).world == "ray"
    assert built({"name": "w", "nodes": 2}).world == "local"
    with pytest.raises(ScenarioError, match="world"):
        built({"name": "w", "nodes": 2, "world": "mars"})
    with pytest.raises(ScenarioError, match=r"world: got 'mars'; allowed: local, netns, ray"):
        built({"name": "w", "nodes": 2}).in_world("mars")


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process sees no Ray installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "ray" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.usefixtures("no_ray")
def test_without_ray_a_ray_scenario_is_skipped_with_the_install_command() -> None:
    report = run_one(built({"name": "w", "nodes": 2, "world": "ray"}), embedded_proxy, 1)

    assert report.skipped is not None
    assert "Ray, which is not installed" in report.skipped
    assert "pip install '.[ray]'" in report.skipped


@pytest.mark.usefixtures("no_ray")
def test_without_ray_a_suite_skips_its_ray_scenarios_and_runs_the_others() -> None:
    on_ray = built({"name": "on-ray", "nodes": 2, "world": "ray"})
    here = built({"name": "here", "nodes": 2})

    with worlds_session([on_ray, here], None):  # Ray missing: nothing to connect, no error
        reports = run_suite([on_ray, here], embedded_proxy, 1, seed=3)

    skipped = {r.scenario.name: r.skipped for r in reports}
    assert skipped["here"] is None
    assert "pip install '.[ray]'" in str(skipped["on-ray"])
    assert nothing_ran([r for r in reports if r.scenario.name == "on-ray"]) is not None  # exit 2


@pytest.mark.usefixtures("no_ray")
def test_without_ray_connecting_says_so_instead_of_an_import_error() -> None:
    from harness.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match=r"pip install '\.\[ray\]'"):
        session.connect()


def test_harness_run_refuses_an_unknown_world_as_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        textwrap.dedent(
            """
            name = "s"
            description = "two nodes"
            nodes = 2
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--world", "mars", "s.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 2
    assert "--world: invalid choice: 'mars'" in result.stderr


def test_a_bare_folder_named_ray_on_the_path_is_not_taken_for_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A folder called ray without Ray installed (a tests/ray, a checkout) imports as a
    # namespace package: the ray world must still say Ray is missing, not crash in ray.init.
    (tmp_path / "ray").mkdir()
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        if name != "ray":
            return real(name, package)
        return importlib.machinery.PathFinder.find_spec("ray", [str(tmp_path)])

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    why = session.unavailable()
    assert why is not None and "not installed" in why


class _Spare:
    """A spare actor's handle: ``preload.remote(modules)`` records what it was asked."""

    def __init__(self, asked: list[list[str]]) -> None:
        self.preload = self
        self._asked = asked

    def remote(self, modules: list[str]) -> str:
        self._asked.append(modules)
        return f"answer {len(self._asked)}"


class _Waits:
    def __init__(self) -> None:
        self.waited: list[Any] = []

    def get(self, refs: Any, timeout: float, what: str) -> Any:
        self.waited.append((refs, what))
        return refs


def test_a_restart_adopts_a_spare_that_answered_with_the_rendezvous_imported() -> None:
    pytest.importorskip("ray", reason="the placement needs ray (the ray extra)")
    from harness.world.process.backends import preload
    from harness.world.ray.cluster import Placement

    waits, asked = _Waits(), []  # type: ignore[var-annotated]
    placement = Placement("tag", waits)  # type: ignore[arg-type]
    modules = preload({"static"})

    placement.warm([_Spare(asked), _Spare(asked)], modules)

    assert "rdzv.rendezvous.static" in modules
    assert asked == [modules, modules]  # each spare imports what a node's first step runs
    assert waits.waited == [(["answer 1", "answer 2"], "the spare actors")]  # and answered


def test_starting_a_local_ray_drops_only_rays_notice_that_token_auth_is_on() -> None:
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    notice = (
        "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled "
        "to opt out."
    )
    try:
        with session._token_notice_dropped():
            logger.warning(notice)  # what Ray 2.60 logs on every start of a local Ray
            logger.warning("Token authentication is disabled for this Ray cluster.")
        logger.warning(notice)  # outside a start of the harness's: Ray's own business
    finally:
        logger.removeHandler(handler)

    assert seen == ["Token authentication is disabled for this Ray cluster.", notice]
