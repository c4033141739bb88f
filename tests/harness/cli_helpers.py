"""Run the ``harness`` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _env(columns: int, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The repo and this folder (for the test backends the node processes import, e.g.
    ``fake_backends``) on ``PYTHONPATH``; ``COLUMNS`` as given."""
    path = os.pathsep.join([str(ROOT), str(HERE)])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": str(columns), **(extra or {})}


def harness(
    *args: str, cwd: Path, columns: int = 200, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli ARGS`` in ``cwd``, run to completion."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=_env(columns, env),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


class Background:
    """A ``harness`` process running in the background; its stdout is read line by line
    on a thread, so a test can wait for a line without blocking on the pipe."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def line(self, starting: str, timeout: float = 120) -> str:
        """The next stdout line that starts with ``starting`` (fails after ``timeout``
        seconds without a new line, or when the output ends first)."""
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line starting {starting!r} within {timeout} s") from None
            if line is None:
                raise AssertionError(f"the output ended before a line starting {starting!r}")
            self._seen.append(line)
            if line.startswith(starting):
                return line

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        """Wait for the exit: ``(status, all of stdout, all of stderr)``."""
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        status = self.proc.wait(timeout)
        self._reader.join(timeout)
        while (line := self._lines.get(timeout=timeout)) is not None:
            self._seen.append(line)
        return status, "".join(self._seen), err


@contextmanager
def harness_process(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[Background]:
    """``python -m harness.cli ARGS`` running in the background.

    On the way out, if it is still running, it and every process below it are killed by
    PID, so a failing test leaves nothing behind.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=cwd,
        env=_env(200, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Background(proc)
    finally:
        if proc.poll() is None:
            with suppress(psutil.Error):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    with suppress(psutil.Error):
                        child.send_signal(signal.SIGKILL)
            proc.kill()
        proc.wait(60)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
