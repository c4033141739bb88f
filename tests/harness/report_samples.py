"""Reports built directly from model objects (no processes) for the renderer tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.run.model import FaultRecord, NodeEvent, NodeOutcome, Report, Violation
from harness.scenario.load import parse
from harness.scenario.model import Scenario


def scenario(name: str, nodes: int, **extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "name": name,
        "description": f"{name}: a scenario built by the report tests.",
        "nodes": nodes,
        **extra,
    }
    return parse(data, f"scenarios/{name}.toml")


def _joined_ok(node: int, start: float, nodes: int, step: float = 0.01) -> NodeOutcome:
    t = start
    events = [NodeEvent(node, t, "started", {"pid": 1000 + node})]
    if node == 0:
        events.append(NodeEvent(node, t + step, "server_listening", {"endpoint": "127.0.0.1:1"}))
    events += [
        NodeEvent(node, t + 2 * step, "connect_attempt", {"attempt": 1, "error": None}),
        NodeEvent(node, t + 3 * step, "connected", {"attempts": 1}),
        NodeEvent(node, t + 4 * step, "joined", {"rank": node, "joined": node + 1}),
        NodeEvent(node, 0.2 + 0.001 * nodes, "complete", {"world_size": nodes}),
        NodeEvent(node, 0.21 + 0.001 * nodes, "returned", {"rank": node}),
    ]
    return NodeOutcome(
        node=node,
        status="ok",
        rank=node,
        world_size=nodes,
        run_id="run",
        started=start - 0.005,
        finished=0.23 + 0.001 * nodes,
        pid=1000 + node,
        events=events,
        shared_store_ok=True,
    )


def happy_report(nodes: int = 3, seed: int = 7) -> Report:
    outcomes = [_joined_ok(n, 0.02 + 0.002 * n, nodes) for n in range(nodes)]
    return Report(scenario("happy-three", nodes), seed, outcomes, duration=0.25 + 0.001 * nodes)


def failing_report() -> Report:
    """Four nodes: a black-holed link on node 3, node 2 paused, node 1 killed; violations."""
    sc = scenario("black-hole-and-kill", 4, field_failure="F28")
    msg = "rendezvous round 0 timed out after 3.0 s: 3 of 4 nodes joined; missing ranks: 3"
    outcomes = []
    for node in (0, 2):
        out = _joined_ok(node, 0.02 + 0.01 * node, 4)
        out.events = [e for e in out.events if e.event not in ("complete", "returned")]
        out.events.append(NodeEvent(node, 3.05, "failed", {"error": "RendezvousTimeoutError"}))
        out.status, out.finished, out.message = "timeout", 3.06, msg
        out.error_class = "rdzv.errors.RendezvousTimeoutError"
        outcomes.append(out)
    killed = _joined_ok(1, 0.03, 4)
    killed.events = killed.events[:4]
    killed.status, killed.finished = "killed", 1.0
    killed.message = "killed by the harness (SIGKILL)"
    attempts = [
        NodeEvent(3, 0.05, "started", {"pid": 1003}),
        *(
            NodeEvent(3, 0.1 + 0.9 * i, "connect_attempt", {"attempt": i + 1, "error": "reset"})
            for i in range(4)
        ),
        NodeEvent(3, 3.04, "failed", {"error": "RendezvousConnectionError"}),
    ]
    lost = NodeOutcome(
        node=3,
        status="connection_error",
        error_class="rdzv.errors.RendezvousConnectionError",
        message="rank 3: something at 127.0.0.1:1 accepts connections but never answers",
        started=0.04,
        finished=3.05,
        events=attempts,
    )
    outcomes.insert(1, killed)
    outcomes.append(lost)
    faults = [
        FaultRecord(
            0, "toxic", [3], 0.06, None, "timeout upstream {'timeout': 0}",
            acted={"connections black-holed": 1},
        ),
        FaultRecord(1, "pause", [2], 0.5, 2.5, "", acted={"nodes paused (SIGSTOP)": 1}),
        FaultRecord(2, "kill", [1], 1.0, 1.0, "", acted={"SIGKILLs delivered": 1}),
    ]  # fmt: skip
    violations = [
        Violation("outcome", "node 1 ended 'killed', expected 'timeout'", (1,)),
        Violation("message", "node 3's message does not match /never answers the handshake/", (3,)),
    ]
    return Report(sc, 2801, outcomes, faults, violations, duration=3.1)


def big_report(nodes: int = 256) -> Report:
    """Many nodes; a link-down window on the upper quarter, which times out."""
    cut = nodes * 3 // 4
    outcomes = []
    for node in range(nodes):
        out = _joined_ok(node, 0.02 + 0.0015 * node, nodes, step=0.004)
        if node >= cut:
            out.events = [
                out.events[0],
                *(
                    NodeEvent(
                        node, out.events[0].t + 0.3 * i, "connect_attempt", {"error": "refused"}
                    )
                    for i in range(1, 4)
                ),
                NodeEvent(node, 1.5, "failed", {"error": "RendezvousTimeoutError"}),
            ]
            out.status, out.finished, out.rank, out.world_size = "timeout", 1.5, None, None
            out.message = "timed out"
        outcomes.append(out)
    for out in outcomes[:cut]:
        out.status, out.finished, out.rank, out.world_size = "timeout", 1.5, None, None
        out.events = [e for e in out.events if e.event not in ("complete", "returned")]
        out.events.append(NodeEvent(out.node, 1.5, "failed", {"error": "RendezvousTimeoutError"}))
        out.message = "timed out; missing ranks"
    refused = {"connection attempts refused (as the nodes saw them)": 3 * (nodes - cut)}
    faults = [
        FaultRecord(
            0, "link_down", list(range(cut, nodes)), 0.01, 1.2, "connections refused", refused
        )
    ]
    sc = scenario("link-down-many", nodes, expect={"outcome": "timeout"})
    return Report(sc, 99, outcomes, faults, duration=1.6)


def error_report() -> Report:
    """The harness itself failed before any node reported."""
    return Report(
        scenario("proxy-unreachable", 2),
        5,
        outcomes=[],
        duration=0.01,
        error="the harness failed while running the scenario:\nToxiproxyUnreachableError: nothing",
    )


def idle_fault_report() -> Report:
    """Four nodes: node 2 starts late, node 3 is absent, and a ``reset_peer`` window on
    nodes 1-2 only saw data still held by a latency toxic ahead of it: it did not act."""
    sc = scenario(
        "reset-behind-latency", 4, expect={"nodes": [{"nodes": [3], "outcome": "absent"}]}
    )
    outcomes = [_joined_ok(n, 0.02 + 0.002 * n, 3) for n in range(2)]
    outcomes.append(_joined_ok(2, 1.0, 3))
    for out in outcomes:  # the round completes once the late node has joined
        out.events = [
            replace(e, t=1.1 + 0.01 * (e.event == "returned"))
            if e.event in ("complete", "returned")
            else e
            for e in out.events
        ]
        out.finished = 1.15
    outcomes.append(NodeOutcome(3, "absent"))
    faults = [
        FaultRecord(
            0, "toxic", [1, 2], 0.01, 2.0, "latency upstream {'latency': 1500}",
            acted={"connections delayed": 2},
        ),
        FaultRecord(
            1, "toxic", [1, 2], 0.01, 1.0, "reset_peer upstream {'timeout': 0}", acted={},
            note="in place on 2 connections, but no data reached it there",
        ),
        FaultRecord(2, "late_start", [2], 0.0, 1.0, "start delayed by 1 s",
                    acted={"nodes started late": 1}),
        FaultRecord(3, "absent", [3], 0.0, None, "never started",
                    acted={"nodes never started": 1}),
    ]  # fmt: skip
    return Report(sc, 11, outcomes, faults, duration=2.1)
