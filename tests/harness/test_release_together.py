"""Nodes start behind a gate and are released together (harness.world.process.node, .packed_node,
harness.run.startup): the scenario's clock starts at the release, start-up is reported apart.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from pathlib import Path
from typing import Any

import multiprocess
import pytest

from harness.report.html import write_html
from harness.report.junit import write_junit
from harness.report.text import result_line
from harness.run.model import NodeEvent
from harness.run.runner import run_scenario
from harness.run.startup import asleep, await_asleep, release_skew
from harness.run.suite import embedded_proxy, run_one
from harness.run.worlds import worlds_for
from harness.scenario.load import parse
from harness.world.base import Launch
from harness.world.messages import Event, Message, Outcome, Ready, Started
from harness.world.process.gate import wait_gate
from harness.world.process.node import Hosting, NodeSpec, run_node
from harness.world.process.packed import _Gate
from harness.world.process.reporting import PipeReporter


def _waiters(wait: object, count: int) -> tuple[list[threading.Thread], list[float]]:
    """``count`` threads that each call ``wait()`` once every one of them is about to."""
    seen: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(count + 1)

    def waiter() -> None:
        barrier.wait()
        when = wait()  # type: ignore[operator]
        with lock:
            seen.append(when)

    threads = [threading.Thread(target=waiter, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    barrier.wait()
    return threads, seen


def test_every_node_waiting_at_the_gate_goes_on_at_the_one_close_of_its_write_end() -> None:
    read, write = os.pipe()
    try:
        threads, seen = _waiters(lambda: wait_gate(read), 8)
        closed_at = time.monotonic()
        os.close(write)
        write = -1
        for thread in threads:
            thread.join(timeout=30)
        assert len(seen) == 8
        assert min(seen) >= closed_at
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_a_node_started_after_the_release_finds_the_gate_open() -> None:
    read, write = os.pipe()
    os.close(write)
    try:
        before = time.monotonic()
        assert wait_gate(read) >= before
    finally:
        os.close(read)


def test_the_node_threads_of_a_packed_process_go_on_once_every_one_saw_the_release() -> None:
    read, write = os.pipe()
    try:
        gate = _Gate(read)
        threads, seen = _waiters(gate.wait, 16)
        closed_at = time.monotonic()
        os.close(write)
        write = -1
        for thread in threads:
            thread.join(timeout=30)
        assert len(seen) == 16
        assert min(seen) >= closed_at
        assert _Gate(None).wait() > 0  # no gate: at once
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_the_release_skew_is_the_spread_of_the_first_started_event_of_each_node() -> None:
    def started(node: int, *times: float) -> list[NodeEvent]:
        return [NodeEvent(node, t, "started", {}) for t in times]

    events = {0: started(0, 0.01), 1: started(1, 0.25, 3.0), 2: []}
    assert release_skew(events) == pytest.approx(0.24)
    assert release_skew({0: started(0, 0.5)}) is None


@pytest.mark.parametrize("pack", [None, 2])
def test_a_run_releases_its_nodes_together_and_counts_its_time_from_the_release(
    pack: int | None, tmp_path: Path
) -> None:
    data: dict[str, object] = {
        "name": "release",
        "description": "release together",
        "nodes": 4,
        "timeouts": {"join": 30},
        "fault": [{"kind": "late_start", "nodes": [3], "delay": 1.0}],
    }
    if pack is not None:
        data["pack"] = pack
    report = run_one(parse(data, "<release>"), embedded_proxy, 7)

    assert report.passed, [v.message for v in report.violations]
    assert report.startup is not None and report.startup > 0
    assert report.release_skew is not None and report.release_skew >= 0
    first = {o.node: next(e.t for e in o.events if e.event == "started") for o in report.outcomes}
    # nothing started before the release (the clock's 0), the late node its delay after it
    assert min(first.values()) >= 0
    assert first[3] >= 1.0
    assert all(o.started == 0.0 for o in report.outcomes if o.node != 3)
    # when each began, as its outcome says: when it saw the release
    assert {o.node: o.began for o in report.outcomes} == first
    assert "started in" in result_line(report) and "release skew" in result_line(report)
    write_junit([report], tmp_path / "junit.xml")
    write_html([report], tmp_path / "report.html")
    assert "release skew" in (tmp_path / "junit.xml").read_text()
    assert "release skew" in (tmp_path / "report.html").read_text()


def _node_calls(backend: str) -> tuple[list[str], list[Message]]:
    """Run one node in this thread with a hosting that records what the node does, in
    order (``forward``, ``adopt``, ``gate``, and each message it puts by name)."""
    calls: list[str] = []
    messages: list[Message] = []

    class Queue:
        def put(self, item: Message) -> None:
            calls.append(item.name if isinstance(item, Event) else type(item).__name__.lower())
            messages.append(item)

    def gate() -> float:
        calls.append("gate")
        return time.monotonic()

    hosting = Hosting(
        forward=lambda node, queue: calls.append("forward"),
        adopt=lambda handler: calls.append("adopt"),
        placement="in the test",
        gate=gate,
    )
    launch = Launch(0, backend, "run", rank=0, world_size=1, join_timeout=5.0)
    run_node(NodeSpec(launch, "127.0.0.1:1"), Queue(), hosting)
    return calls, messages


def test_a_node_builds_its_handler_before_it_says_ready_and_begins_its_rendezvous_at_once() -> None:
    calls, messages = _node_calls("fake_backends:offline")

    assert calls == ["forward", "adopt", "ready", "gate", "started", "outcome"]
    ready, started, outcome = messages
    assert isinstance(ready, Ready) and isinstance(started, Started)
    assert ready.pid == os.getpid() and ready.tid == threading.get_native_id()
    assert isinstance(outcome, Outcome) and outcome.status == "error"
    assert "never touches the network" in (outcome.message or "")
    assert outcome.started == started.t and outcome.placement == started.placement


def test_a_factory_that_raises_is_the_nodes_outcome_after_the_release() -> None:
    calls, messages = _node_calls("fake_backends:broken")

    assert calls == ["forward", "ready", "gate", "started", "outcome"]
    outcome = messages[-1]
    assert isinstance(outcome, Outcome) and outcome.status == "error"
    assert outcome.error_class == "builtins.ValueError"
    assert "broken factory" in (outcome.message or "")


def test_a_node_message_is_a_plain_pickle_and_one_pickle_cannot_take_goes_through_dill() -> None:
    reader, writer = multiprocess.Pipe(duplex=False)
    try:
        reporter = PipeReporter(writer)
        plain = Started(3, 1.5, pid=7, placement="process")
        reporter.put(plain)
        raw = reader.recv_bytes()
        assert pickle.loads(raw) == plain  # the standard library's pickle reads it

        def square(x: int) -> int:
            return x * x

        reporter.put(Event(3, 2.0, "odd", {"f": square}))
        odd = reader.recv()
        assert odd.fields["f"](4) == 16
    finally:
        reader.close()
        writer.close()


def test_a_thread_blocked_at_a_gate_is_asleep_and_a_running_one_is_not() -> None:
    read, write = os.pipe()
    tid: list[int] = []
    known = threading.Event()

    def waiter() -> None:
        tid.append(threading.get_native_id())
        known.set()
        wait_gate(read)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    try:
        assert known.wait(30)
        me = (os.getpid(), threading.get_native_id())
        assert not asleep(*me)  # reading its own state, this thread is running
        assert await_asleep([(os.getpid(), tid[0])], threading.Event(), limit=30) == []
        assert await_asleep([me], threading.Event(), limit=0.01) == [me]
        stopped = threading.Event()
        stopped.set()
        assert await_asleep([me], stopped) == [me]  # stop: at once
        assert asleep(2**22 + 1, 2**22 + 1)  # no such process: nothing to wait for
    finally:
        os.close(write)
        thread.join(timeout=30)
        os.close(read)


class _SlowBuild:
    """The local world, but its build takes ``seconds`` more (as a Ray world's steps do)."""

    def __init__(self, worlds: Any, seconds: float) -> None:
        self.worlds, self.seconds = worlds, seconds
        self.name, self.capabilities = worlds.name, worlds.capabilities

    def __call__(self, layout: Any, on_message: Any) -> Any:
        world = self.worlds(layout, on_message)
        build = world.build

        def slow(seed: int) -> None:
            time.sleep(self.seconds)
            build(seed)

        world.build = slow
        return world


def test_the_start_up_reported_includes_the_worlds_build() -> None:
    scenario = parse(
        {"name": "slow-build", "description": "d", "nodes": 2, "timeouts": {"join": 30}}, "<s>"
    )
    with embedded_proxy() as client:
        report = run_scenario(scenario, _SlowBuild(worlds_for(scenario, client), 1.5), 7)

    assert report.passed, [v.message for v in report.violations]
    assert report.startup is not None and report.startup >= 1.5  # the build slept 1.5 s
