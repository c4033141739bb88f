"""Run the ``harness`` command line in a subprocess, as a user would."""

from __future__ import annotations

import fcntl
import os
import pty
import queue
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


#: A small scenario every node of which passes (three nodes through their proxy links).
HAPPY = """\
name = "tiny-happy"
description = "Three nodes rendezvous through their proxy links."
seed = 11
nodes = 3

[timeouts]
join = 10
"""


def _env(columns: int, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The repo and this folder (for the test backends the node processes import, e.g.
    ``fake_backends``) on ``PYTHONPATH``; ``COLUMNS`` as given."""
    path = os.pathsep.join([str(ROOT), str(HERE)])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": str(columns), **(extra or {})}


def harness_on_terminal(*args: str, cwd: Path, columns: int) -> tuple[int, str, str]:
    """``python -m harness.cli ARGS`` with its stdout on a pseudo-terminal ``columns``
    wide (no colours); returns exit status, what the terminal showed (``\\r\\n`` made
    ``\\n``) and stderr."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    extra = {"TERM": "xterm", "NO_COLOR": "1"}  # rich takes a "dumb" one for 80 columns
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=cwd,
            env=_env(columns, extra),
            stdin=subprocess.DEVNULL,
            stdout=secondary,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(secondary)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    shown = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return proc.returncode, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown), err


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


def harness_into_a_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m harness.cli ARGS`` whose stdout is a pipe nobody reads any more (its
    read end closed before the command starts, as ``| head -1`` leaves it once done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *args],
            cwd=cwd,
            env=_env(200, None),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        os.close(write_end)


class Background:
    """A ``harness`` process running in the background; its stdout is read line by line
    and its stderr whole, each on a thread, so a test can wait for a line without blocking
    on a pipe and a chatty process never blocks on a full one."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._seen: list[str] = []
        self._err: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_err, daemon=True)
        self._err_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        self._err.append(self.proc.stderr.read())

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
        """Wait for the exit: ``(status, all of stdout, all of stderr)``.

        A harness that has not exited within ``timeout`` seconds is asked for its threads'
        stacks (SIGUSR1, see ``harness.cli.main``), killed with every process below it, and
        the test fails showing those stacks and the processes that were still alive; so
        does one whose output pipes stay open after it exited (a leftover process holds them).
        """
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            alive = _describe_tree(self.proc.pid)
            with suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGUSR1)
            self._err_reader.join(3)  # a moment to print the stacks (the pipe stays open)
            _kill_tree(self.proc.pid)
            self._err_reader.join(10)
            raise AssertionError(
                f"the harness did not exit within {timeout} s; alive then: {alive}\n"
                f"its stderr (with its threads' stacks):\n{''.join(self._err)}"
            ) from None
        self._reader.join(timeout)
        self._err_reader.join(timeout)
        if self._reader.is_alive() or self._err_reader.is_alive():
            raise AssertionError(
                f"the harness exited ({status}) but its output pipes stayed open for {timeout} s:"
                " a process it started outlived it"
            )
        while (line := self._lines.get(timeout=timeout)) is not None:
            self._seen.append(line)
        return status, "".join(self._seen), "".join(self._err)


def _describe_tree(pid: int) -> list[str]:
    """``PID STATUS COMMAND`` of ``pid`` and every process below it that still exists."""
    described = []
    with suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [root, *root.children(recursive=True)]:
            with suppress(psutil.Error):
                command = " ".join(proc.cmdline())[:100]
                described.append(f"{proc.pid} {proc.status()} {command}")
    return described


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it (by PID; gone ones are skipped)."""
    with suppress(psutil.Error):
        root = psutil.Process(pid)
        for proc in [*root.children(recursive=True), root]:
            with suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)


@contextmanager
def harness_process(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[Background]:
    """``python -m harness.cli ARGS`` running in the background.

    On the way out, if it is still running, it and every process below it are killed by
    PID, so a failing test leaves nothing behind.
    """
    command = [sys.executable, "-c", _AS_AT_A_TERMINAL, "-m", "harness.cli", *args]
    with _background(command, cwd, env) as run:
        yield run


@contextmanager
def harness_script(
    script: Path, *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> Iterator[Background]:
    """``python SCRIPT ARGS`` (a test driver that uses the harness in-process) running in
    the background, ended like :func:`harness_process`."""
    command = [sys.executable, "-c", _AS_AT_A_TERMINAL, str(script), *args]
    with _background(command, cwd, env) as run:
        yield run


#: Runs the rest of its command line with SIGINT back at its default action. A test suite
#: started in the background of a non-interactive shell (``cmd &``, ``nohup``, some CI
#: runners) runs with SIGINT ignored, every process it starts inherits that, and Python then
#: never turns SIGINT into ``KeyboardInterrupt``; these tests act as a user pressing Ctrl-C
#: at a terminal, where SIGINT is not ignored. (An exec wrapper, not ``preexec_fn``, which
#: is unsafe in a process with threads.)
_AS_AT_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


@contextmanager
def _background(
    command: list[str], cwd: Path, env: Mapping[str, str] | None
) -> Iterator[Background]:
    proc = subprocess.Popen(
        command,
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
            _kill_tree(proc.pid)
        proc.wait(60)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
