"""Ctrl-C ends a large run at once: its node processes are killed and reaped together, each
wait covering all of them, not one wait per node (at 1024 nodes those added up to seconds;
``bench/bench_interrupt.py`` measures the whole SIGINT-to-exit time)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import psutil
import pytest

import harness.world.process.cluster as cluster
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse

NODES = 24

# Node 0 never starts, so every other node keeps trying to reach the store for 300 s: all
# of them are alive when the run is interrupted.
WAITING = {
    "name": "workers-wait-for-a-store",
    "description": "Node 0 never starts; the others wait for its store until interrupted.",
    "seed": 5,
    "nodes": NODES,
    "timeouts": {"join": 300},
    "fault": [{"kind": "absent", "nodes": [0]}],
}


def test_an_interrupted_run_ends_every_node_process_with_one_wait_for_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[int] = []
    real = cluster.wait_any

    def counting(objects: Any, timeout: float | None = None) -> Any:
        waits.append(len(objects))
        return real(objects, timeout)

    monkeypatch.setattr(cluster, "wait_any", counting)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    stop = threading.Event()
    nodes: list[psutil.Process] = []

    def interrupt_once_all_run() -> None:
        deadline = time.monotonic() + 120  # then interrupt anyway: the asserts will say why
        while not stop.wait(0.05) and time.monotonic() < deadline:
            try:  # the workers: the forkserver's children (the forkserver itself is ours)
                fresh = [
                    p
                    for p in me.children(recursive=True)
                    if p.pid not in before and p.ppid() != me.pid
                ]
            except psutil.Error:  # a process ended while we looked: look again
                continue
            if len(fresh) >= NODES - 1:
                nodes.extend(fresh)
                break
        stop.set()

    watcher = threading.Thread(target=interrupt_once_all_run, daemon=True)
    watcher.start()
    try:
        report = run_one(parse(WAITING, "<waiting>"), embedded_proxy, 5, stop)
    finally:
        stop.set()
        watcher.join(30)
    assert report.interrupted
    assert {o.status for o in report.outcomes if o.node != 0} == {"interrupted"}
    # the grace check sees every process in one wait; then each wait of the reaping covers
    # every process still running, never one of them while the others queue behind it
    assert waits[0] == waits[1] == NODES - 1, waits
    assert all(later < earlier for earlier, later in itertools.pairwise(waits[1:]))
    _, alive = psutil.wait_procs(nodes, timeout=30)
    assert not alive, f"left running: {alive}"
