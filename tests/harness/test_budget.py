"""What a scenario costs and how many run at once (harness.run.budget, run_suite, -j)."""

from __future__ import annotations

import argparse
import threading
from typing import Any

import pytest

import harness.run.suite as suite
from harness.cli.common import jobs_arg
from harness.run.budget import NODES_PER_CORE, Budget, auto_jobs, capacity, cost
from harness.run.model import Report
from harness.scenario.load import parse
from harness.scenario.model import Scenario

GIB = 1024**3


def _scenario(name: str, nodes: int) -> Scenario:
    return parse({"name": name, "description": "cost", "nodes": nodes}, f"<{name}>")


def test_the_machine_holds_512_nodes_per_core_unless_its_memory_holds_fewer() -> None:
    assert capacity(cpus=2, memory=64 * GIB) == 2 * NODES_PER_CORE
    assert capacity(cpus=2, memory=GIB) == 128  # 8 MiB a node
    assert capacity(cpus=1, memory=0) == 1
    assert auto_jobs(cpus=4) == 4


def test_a_scenario_costs_its_nodes_packed_or_not() -> None:
    assert cost(_scenario("small", 4)) == 4
    packed = parse({"name": "p", "description": "d", "nodes": 64, "pack": 8}, "<p>")
    assert cost(packed) == 64


def test_a_scenario_that_does_not_fit_waits_until_the_running_one_gives_its_room_back() -> None:
    budget = Budget(10)
    stop = threading.Event()
    assert budget.acquire(8, stop)
    got = threading.Event()

    def second() -> None:
        if budget.acquire(4, stop):
            got.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not got.wait(0.3)  # 8 + 4 > 10: it waits
    budget.release(8)
    thread.join(timeout=30)
    assert got.is_set() and budget.used == 4


def test_a_scenario_larger_than_the_machine_runs_when_nothing_else_does() -> None:
    budget = Budget(10)
    stop = threading.Event()
    assert budget.acquire(50, stop)
    budget.release(50)
    assert budget.used == 0


def test_a_stopped_suite_stops_waiting_for_room() -> None:
    budget = Budget(10)
    stop = threading.Event()
    assert budget.acquire(10, stop)
    stop.set()
    assert not budget.acquire(1, stop, poll=0.01)
    assert budget.used == 10


def test_run_suite_never_runs_scenarios_together_beyond_what_the_machine_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running: list[int] = []
    peaks: list[int] = []
    lock = threading.Lock()
    pair = threading.Event()  # two small ones ran at once

    def fake_run_one(scenario: Scenario, proxies: Any, seed: int, stop: Any) -> Report:
        with lock:
            running.append(scenario.nodes)
            peaks.append(sum(running))
            if running.count(4) >= 2:
                pair.set()
        # a window in which the budget could wrongly start another beside this one
        pair.wait(0.3 if scenario.nodes > 4 else 10)
        with lock:
            running.remove(scenario.nodes)
        return Report(scenario, seed, outcomes=[])

    monkeypatch.setattr(suite, "run_one", fake_run_one)
    monkeypatch.setattr(suite, "capacity", lambda: 1024)
    scenarios = [_scenario("big-a", 1024), _scenario("big-b", 1024), _scenario("s", 4)]
    scenarios += [_scenario(f"small-{i}", 4) for i in range(3)]

    reports = suite.run_suite(scenarios, jobs=2, seed=1)

    assert [r.scenario.name for r in reports] == [s.name for s in scenarios]
    assert max(peaks) <= 1024  # never both 1024-node scenarios, nor one with a small one
    assert peaks[:2] == [1024, 1024]  # in turn: the small ones did not overtake big-b
    assert 8 in peaks  # small ones did run two at a time


def test_minus_j_takes_auto_or_a_whole_number() -> None:
    assert jobs_arg("auto") == "auto"
    assert jobs_arg("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="auto or a whole number"):
        jobs_arg("0")
