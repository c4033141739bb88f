"""Signals to one part of a job node (harness/world/process/parts.py): the workers' PIDs as
their agent announced them, by local rank, and only the named worker signalled."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from harness.world.messages import Event
from harness.world.process.parts import JobParts


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) for _ in range(2)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_worker_is_killed_alone_by_its_local_rank(workers: list[subprocess.Popen[bytes]]) -> None:
    parts = JobParts()
    pids = [proc.pid for proc in workers]
    parts.note(Event(3, 0.0, "workers_started", {"pids": pids}, part="agent"))
    parts.note(Event(3, 0.0, "workers_started", {"pids": [1]}, part="worker 0"))  # not an agent

    assert parts.signal_worker(3, "worker 1", signal.SIGKILL)

    assert workers[1].wait(timeout=60) == -signal.SIGKILL
    assert workers[0].poll() is None  # its sibling runs on
    assert not parts.signal_worker(3, "worker 2", signal.SIGKILL)  # no such worker
    assert not parts.signal_worker(4, "worker 0", signal.SIGKILL)  # not a job node
    parts.forget(3)  # a new incarnation: the old workers are not its parts
    assert parts.workers(3) == []
