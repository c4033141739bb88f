"""Ctrl-C during ``harness run --world ray``: the run stops, and the local Ray the harness
started is gone with every process it ran (raylet, GCS, workers, actors)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from ray_helpers import ROOT

from harness.world.ray.session import INSTALL, unavailable

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(unavailable() is not None, reason=f"Ray is not installed: {INSTALL}"),
]

WAITS = """\
name = "waits-on-ray"
description = "Node 2 never starts: the others wait for it for a minute."
seed = 5
nodes = 3

[timeouts]
join = 60

[[fault]]
kind = "absent"
nodes = [2]
"""


def _actors(family: list[psutil.Process]) -> list[psutil.Process]:
    found = []
    for proc in family:
        try:
            if "NodeGroup" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_ctrl_c_stops_the_run_and_the_local_ray_the_harness_started(tmp_path: Path) -> None:
    (tmp_path / "waits.toml").write_text(WAITS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--world", "ray", "waits.toml"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    family: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.poll() is None:
            family = psutil.Process(run.pid).children(recursive=True)
            if len(_actors(family)) >= 2:  # the run's node actors are up
                break
            time.sleep(0.5)
        assert len(_actors(family)) >= 2, "the run's actors never started"
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
        _, alive = psutil.wait_procs(family, timeout=60)
    finally:
        if run.poll() is None:  # the test failed first: stop the run as Ctrl-C would
            run.send_signal(signal.SIGINT)
            try:
                run.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                run.kill()
                run.communicate()
        for proc in family:  # whatever of its Ray outlived it, by PID
            try:
                proc.kill()
            except psutil.Error:
                continue
    assert run.returncode == 130, out + err
    assert "interrupted (Ctrl-C)" in err
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"
