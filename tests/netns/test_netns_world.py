"""The netns world: nodes in namespaces of their own, kernel faults, nothing left behind.

Skipped where the machine cannot host it (not root, no nft): the reason is the world's own.
Every test removes the namespaces it made, also on failure (by name, this process's or a
child's it started).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.run.model import Report
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import load, parse
from harness.world.netns import naming
from harness.world.netns.network import Network, sweep
from harness.world.netns.shell import has_netem, run, why_not

# netns: they create namespaces, so a plain pytest leaves them to `tox -e netns`.
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(why_not() is not None, reason=str(why_not())),
]


def _scenario(**fields: Any) -> Any:
    data = {"name": "netns-test", "description": "a test", "world": "netns", **fields}
    return parse(data, "<test>")


def _ours() -> list[str]:
    prefix = f"{naming.PREFIX}{os.getpid()}-"
    return [name for name in naming.listed() if name.startswith(prefix)]


@pytest.fixture(autouse=True)
def _no_namespace_left() -> Iterator[None]:
    before = set(_ours())
    yield
    left = [name for name in _ours() if name not in before]
    for name in left:
        run(["ip", "netns", "del", name], check=False)
    assert not left, f"namespaces left behind: {left}"


def _run(seed: int = 1, **fields: Any) -> Report:
    return run_one(_scenario(**fields), embedded_proxy, seed)


@contextlib.contextmanager
def _no_proxy() -> Iterator[Any]:
    raise AssertionError("a proxy was started for a netns run")
    yield  # pragma: no cover


def test_a_netns_run_is_handed_no_proxy_even_with_a_toxic_it_proxies_itself() -> None:
    scenario = _scenario(
        nodes=2,
        timeouts={"join": 10},
        fault=[{"kind": "toxic", "type": "latency", "attributes": {"latency": 50}}],
    )
    report = run_one(scenario, _no_proxy, 1)
    assert report.error is None, report.error
    assert report.passed, report.violations


def _messages(report: Report) -> dict[int, str]:
    return {o.node: o.message or "" for o in report.outcomes}


def test_nodes_rendezvous_each_in_a_namespace_of_its_own() -> None:
    report = _run(nodes=3, timeouts={"join": 10})
    assert report.passed, report.violations
    assert [o.status for o in report.outcomes] == ["ok", "ok", "ok"]
    assert not _ours()


def test_a_dropped_syn_is_reported_as_no_answer_and_counted() -> None:
    report = _run(
        nodes=2,
        timeouts={"join": 2},
        fault=[{"kind": "drop"}],
        expect={"outcome": "timeout", "nodes": [{"nodes": [1], "outcome": "connection_error"}]},
    )
    assert report.passed, report.violations
    assert "a filtered port?" in _messages(report)[1]
    assert "198.18.0.10:29500" in _messages(report)[1]  # no link: it dials node 0 itself
    (fault,) = report.faults
    assert fault.acted and fault.acted.get("SYNs dropped", 0) >= 1


def test_a_rejected_syn_is_reported_as_refused() -> None:
    report = _run(
        nodes=2,
        timeouts={"join": 2},
        fault=[{"kind": "reject"}],
        expect={"outcome": "timeout", "nodes": [{"nodes": [1], "outcome": "connection_error"}]},
    )
    assert report.passed, report.violations
    assert "refused: the host answered" in _messages(report)[1]
    (fault,) = report.faults
    assert fault.acted and fault.acted["connection attempts reset"] >= 1


def test_the_unreachable_second_address_of_the_store_host_gives_no_route() -> None:
    report = _run(
        nodes=2,
        timeouts={"join": 2},
        endpoint={"host": "198.19.0.1"},
        expect={"outcome": "timeout", "nodes": [{"nodes": [1], "outcome": "connection_error"}]},
    )
    assert report.passed, report.violations
    assert "no route to the host" in _messages(report)[1]


def test_a_host_name_endpoint_resolves_per_node_and_can_stop_resolving() -> None:
    report = _run(
        nodes=2,
        timeouts={"join": 3},
        endpoint={"host": "store.rdzv.test"},
        fault=[{"kind": "dns", "nodes": [1], "at": 0.0, "duration": 1.0}],
    )
    assert report.passed, report.violations
    (fault,) = report.faults
    assert fault.acted is not None


_THROUGH_THE_HARNESS = [
    {"kind": "toxic", "type": "latency", "attributes": {"latency": 50}},
    {"kind": "store_op", "op": "GET", "action": "delay", "delay": 0.1},
]


@pytest.mark.parametrize("via", [[], _THROUGH_THE_HARNESS], ids=["direct", "links"])
def test_an_interrupted_run_removes_its_namespaces(via: list[dict[str, Any]]) -> None:
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    try:
        report = run_one(
            _scenario(nodes=2, timeouts={"join": 30}, fault=[{"kind": "drop"}, *via]),
            embedded_proxy,
            1,
            stop,
        )
    finally:
        timer.cancel()
    assert report.interrupted
    assert not _ours()
    # the threads that entered node 0's namespace are gone with it
    names = {"toxiproxy", "harness-store-faults"}
    assert not [t.name for t in threading.enumerate() if t.name in names]


_CHILD = """
import sys, time
from harness.world.netns.network import Network
Network("deadbeef", 3).build()
print("built", flush=True)
time.sleep(120)
"""


def test_a_later_run_removes_what_a_sigkilled_harness_left() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "built"
        left = naming.run_namespaces("deadbeef", pid=child.pid)
        assert len(left) == 4  # the switch and three nodes
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert set(left) <= set(sweep())
        assert naming.run_namespaces("deadbeef", pid=child.pid) == []
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        for name in naming.run_namespaces("deadbeef", pid=child.pid):
            run(["ip", "netns", "del", name], check=False)


def test_teardown_reports_a_namespace_it_could_not_remove_as_a_leak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    network = Network("feedf00d", 1)
    network.build()
    try:
        monkeypatch.setattr(
            "harness.world.netns.network.run_namespaces", lambda run_id: ["harness-1-x-n0"]
        )
        problems = network.teardown()
    finally:
        monkeypatch.undo()
        for name in naming.run_namespaces("feedf00d"):
            run(["ip", "netns", "del", name], check=False)
    assert problems == ["network namespaces still present after teardown: harness-1-x-n0"]


def test_a_partition_of_half_the_nodes_names_the_missing_ranks_on_the_store_side() -> None:
    report = _run(
        nodes=4,
        timeouts={"join": 2},
        fault=[{"kind": "partition", "nodes": [2, 3]}],
        expect={
            "outcome": "timeout",
            "nodes": [
                {"nodes": [0, 1], "outcome": "timeout", "message": "missing ranks: 2-3"},
                {"nodes": [2, 3], "outcome": "connection_error"},
            ],
        },
    )
    assert report.passed, report.violations
    (fault,) = report.faults
    assert fault.acted and fault.acted["packets dropped"] >= 2


def test_process_faults_work_as_in_the_local_world() -> None:
    report = _run(
        nodes=3,
        timeouts={"join": 10},
        fault=[
            {"kind": "late_start", "nodes": [2], "delay": 2.0},
            {"kind": "restart", "nodes": [1], "at": 0.5},
            {"kind": "pause", "nodes": [0], "at": 0.7, "duration": 1.0},
        ],
    )
    assert report.passed, report.violations
    acted = {fault.kind: fault.acted for fault in report.faults}
    assert acted["restart"] == {"nodes killed": 1, "nodes restarted": 1}
    assert acted["pause"] == {"nodes paused": 1}


FUZZ_DATA = Path(__file__).resolve().parents[1] / "harness/fuzz_data"


def test_two_restarts_of_a_node_on_one_event_start_one_replacement_in_namespaces() -> None:
    found = load(FUZZ_DATA / "two-restarts-one-event.toml")

    report = run_one(found.in_world("netns"), embedded_proxy, 0)

    assert report.passed, report.violations  # issue 30: rank 2 claimed by two replacements
    assert report.faults[2].acted == {"restarts merged with fault[1]'s (the node starts once)": 1}


def test_process_fault_pairs_at_one_instant_act_on_what_the_first_left_in_namespaces() -> None:
    found = load(FUZZ_DATA / "process-faults-meet-on-one-node.toml")

    report = run_one(found.in_world("netns"), embedded_proxy, 0)

    assert report.passed, report.violations  # node 1 killed: a kill cancels its restart
    assert report.faults[1].acted == {"restarts cancelled (fault[0]'s: the node stays down)": 1}
    assert report.faults[5].note == "node 3 was down, fault[4]'s start pending"
    (node1,) = [o for o in report.outcomes if o.node == 1]
    assert node1.status == "killed" and "fault[0]'s restart cancelled" in (node1.message or "")


_SLOW = {"kind": "toxic", "nodes": [1], "type": "latency", "attributes": {"latency": 200}}


def test_a_slow_link_and_a_filtered_store_port_act_on_the_same_node_in_one_run() -> None:
    report = _run(
        nodes=3,
        timeouts={"join": 15},
        fault=[
            {**_SLOW, "stream": "upstream"},
            {**_SLOW, "stream": "downstream"},
            {"kind": "drop", "nodes": [1], "ports": ["store"], "at": 0.0, "duration": 2.0},
        ],
    )
    assert report.passed, report.violations
    assert [o.status for o in report.outcomes] == ["ok", "ok", "ok"]
    upstream, downstream, drop = report.faults
    assert upstream.acted.get("connections delayed", 0) >= 1, upstream
    assert downstream.acted.get("connections delayed", 0) >= 1, downstream
    assert drop.acted.get("SYNs dropped", 0) >= 1, drop


def test_a_node_behind_a_proxy_link_still_meets_the_kernel_filter_itself() -> None:
    # The link listens in node 0's namespace, so node 2's own SYN to it is dropped: it
    # reports a filtered port (no answer), not a connection the proxy accepted and closed.
    report = _run(
        nodes=3,
        timeouts={"join": 3},
        fault=[{**_SLOW, "stream": "upstream"}, {"kind": "drop", "nodes": [2], "ports": ["store"]}],
        expect={
            "outcome": "timeout",
            "nodes": [
                {"nodes": [0, 1], "outcome": "timeout", "message": "missing ranks: 2"},
                {"nodes": [2], "outcome": "connection_error", "message": "a filtered port\\?"},
            ],
        },
    )
    assert report.passed, report.violations
    assert "198.18.0.10:29500" not in _messages(report)[2]  # it dialled its link
    slow, drop = report.faults
    assert slow.acted.get("connections delayed", 0) >= 1, slow
    assert drop.acted.get("SYNs dropped", 0) >= 1, drop


def test_a_link_down_in_the_netns_world_refuses_the_node_until_it_comes_up() -> None:
    report = _run(
        nodes=3,
        timeouts={"join": 15},
        fault=[{"kind": "link_down", "nodes": [2], "at": 0.0, "duration": 1.0}],
    )
    assert report.passed, report.violations
    (down,) = report.faults
    assert down.acted.get("connection attempts refused (as the nodes saw them)", 0) >= 1, down


def test_a_store_rule_acts_in_the_netns_world_beside_a_kernel_fault() -> None:
    delay = {"kind": "store_op", "nodes": [1], "op": "COMPARE_SET", "action": "delay"}
    report = _run(
        nodes=3,
        timeouts={"join": 15},
        fault=[
            delay | {"keys": "*/claim/*", "delay": 0.5},
            {"kind": "drop", "nodes": [2], "ports": ["store"], "at": 0.0, "duration": 1.0},
        ],
    )
    assert report.passed, report.violations
    assert [o.status for o in report.outcomes] == ["ok", "ok", "ok"]
    store, drop = report.faults
    assert store.acted == {"COMPARE_SET requests held": 1}, store
    assert drop.acted.get("SYNs dropped", 0) >= 1, drop


def test_netem_is_detected_not_assumed() -> None:
    assert isinstance(has_netem(), bool)
