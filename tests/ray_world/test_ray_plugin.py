"""The pytest plugin's Ray options: ``--harness-world`` / ``harness_world`` and
``--harness-ray-address`` / ``harness_ray_address``.

Each test runs pytest in a process of its own on a throwaway project; the plugin starts a
local Ray for that session at the first scenario in the ray world and stops it at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from ray_helpers import ROOT

from harness.world.ray.session import INSTALL, unavailable

SCENARIO = """\
name = "two-nodes-on-ray"
description = "Two nodes join; both get ranks."
seed = 11
nodes = 2

[timeouts]
join = 30
"""


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    installed = any(ep.name == "harness" for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "harness.pytest_plugin"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _project(root: Path, ini: str = "") -> Path:
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    (root / "scenarios").mkdir()
    (root / "scenarios" / "two.toml").write_text(SCENARIO)
    return root


def test_an_unknown_world_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    result = _pytest(_project(tmp_path), "--harness-world", "mars")

    assert result.returncode != 0
    assert "--harness-world: expected one of local, netns, ray, got 'mars'" in result.stderr


@pytest.mark.ray
@pytest.mark.skipif(unavailable() is not None, reason=f"Ray is not installed: {INSTALL}")
def test_the_ini_world_runs_scenario_items_on_a_local_ray_started_for_the_session(
    tmp_path: Path,
) -> None:
    _project(tmp_path, "harness_world = ray")
    result = _pytest(tmp_path, "--harness-report", "out", "-q")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert "ray: its own actor" in (tmp_path / "out" / "report.html").read_text()
