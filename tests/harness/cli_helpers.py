"""Run the ``harness`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli ARGS`` in ``cwd``; the repo and this folder (for the test
    backends the node processes import, e.g. ``fake_backends``) are on ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
