"""Ctrl-C during ``harness run --world ray``, at each step of its start-up and while it runs:
the run stops within moments, exits as the local world does on Ctrl-C (130, "interrupted
(Ctrl-C)"), and the local Ray the harness started is gone with every process it ran
(raylet, GCS, agents, workers, actors).

The child announces its steps on stderr (``HARNESS_RAY_STEPS=1``,
:mod:`harness.world.ray.steps`); the signal is sent when the chosen step is announced, so it
lands inside that step's wait on Ray, not after a guessed delay.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from ray_helpers import AS_AT_A_TERMINAL, ROOT

from harness.world.ray.session import INSTALL, unavailable
from harness.world.ray.steps import ENV, STEPS

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(unavailable() is not None, reason=f"Ray is not installed: {INSTALL}"),
]

#: Nodes 1 and 2 wait for node 3, which never starts, for far longer than the test waits.
WAITS = """\
name = "waits-on-ray"
description = "Node 3 never starts: the others wait for it for ten minutes."
seed = 5
nodes = 4

[timeouts]
join = 600

[[fault]]
kind = "absent"
nodes = [3]
"""

#: From the signal to the harness's exit, at most (a step's Ray call returns first: on a
#: busy 2-core machine a local Ray takes up to ~10 s to start, actors seconds each).
STOPPED_WITHIN = 60.0
#: The steps a Ctrl-C is sent at (every one but ``ray-up`` and ``release``, which last
#: no time; ``running``: after the release, the scenario running).
AT = [s for s in STEPS if s not in ("ray-up", "release")]


class _Child:
    """``harness run --world ray`` announcing its steps; every process it ever had is
    remembered (a watcher thread), so that the test can prove they are gone."""

    def __init__(self, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: "1"}
        command = ["-m", "harness.cli", "run", "--world", "ray", "waits.toml"]
        self.proc = subprocess.Popen(  # as at a terminal: SIGINT not ignored
            [sys.executable, "-c", AS_AT_A_TERMINAL, *command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.steps: list[str] = []
        self.err: list[str] = []
        self.family: dict[int, psutil.Process] = {}
        self._announced = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]
        for thread in self._readers:
            thread.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._announced:
                self.err.append(line)
                if line.startswith("harness-ray-step: "):
                    self.steps.append(line.split(":", 1)[1].strip())
                self._announced.notify_all()
        with self._announced:
            self._announced.notify_all()

    def _watch(self) -> None:
        try:
            parent = psutil.Process(self.proc.pid)
        except psutil.Error:
            return
        while self.proc.poll() is None:
            try:
                for child in parent.children(recursive=True):
                    self.family.setdefault(child.pid, child)
            except psutil.Error:
                return
            time.sleep(0.1)

    def wait_for_step(self, step: str, timeout: float) -> bool:
        """Until the child announced ``step`` (or ended); whether it did."""
        with self._announced:
            return self._announced.wait_for(
                lambda: step in self.steps or self.proc.poll() is not None, timeout
            ) and (step in self.steps)

    def stop(self) -> None:
        """End the child and whatever of its Ray outlived it (by PID)."""
        if self.proc.poll() is None:  # the test failed first: stop it as Ctrl-C would
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for proc in list(self.family.values()):
            try:
                proc.kill()
            except psutil.Error:
                continue
        for thread in self._readers:
            thread.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("step", AT)
def test_ctrl_c_at_each_step_stops_the_run_and_the_local_ray_the_harness_started(
    tmp_path: Path, step: str
) -> None:
    (tmp_path / "waits.toml").write_text(WAITS)
    child = _Child(tmp_path)
    try:
        assert child.wait_for_step(step, timeout=180), (
            f"the run never announced step {step!r}: {''.join(child.err)}"
        )
        if step == "running":
            time.sleep(1.0)  # well into the run: the nodes wait on the store
        child.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        try:
            child.proc.wait(timeout=STOPPED_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"Ctrl-C at {step!r} not acted on within {STOPPED_WITHIN:.0f}s")
        took = time.monotonic() - sent
        print(f"Ctrl-C at {step!r}: the harness exited {took:.1f}s later")
        _, alive = psutil.wait_procs(list(child.family.values()), timeout=60)
    finally:
        child.stop()
    err = "".join(child.err)
    assert child.proc.returncode == 130, f"after {took:.1f}s: {err}"
    assert "harness run: interrupted (Ctrl-C)" in err, err
    assert not alive, f"left running: {[(p.pid, p.name()) for p in alive]}"
