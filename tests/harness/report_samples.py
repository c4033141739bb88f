"""Reports built directly from model objects (no processes) for the renderer tests."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from harness.run.checks import check
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
        FaultRecord(1, "pause", [2], 0.5, 2.5, "", acted={"nodes paused": 1}),
        FaultRecord(2, "kill", [1], 1.0, 1.0, "", acted={"nodes killed": 1}),
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


def _scale_ok(node: int, nodes: int, run_id: str, rng: random.Random) -> NodeOutcome:
    """One node of a large run that joined, completed and shut down, with the fields rdzv's
    events really carry (run id, round, rank, endpoint, elapsed)."""
    launched = 0.05 + 6.0 * node / nodes + rng.uniform(0.0, 0.02)
    t0 = launched + 0.012
    base = {"run_id": run_id, "round": 0, "rank": node, "endpoint": "127.0.0.1:41234"}

    def rdzv(t: float, name: str, **extra: Any) -> NodeEvent:
        return NodeEvent(node, t, name, {**base, "elapsed": t - t0, **extra})

    events = [NodeEvent(node, t0, "started", {"pid": 20000 + node})]
    if node == 0:
        listening = {"endpoint": base["endpoint"]}
        events.append(NodeEvent(node, t0 + 0.004, "server_listening", listening))
    t = t0 + 0.005
    retried = node % 7 == 3
    if retried:  # the connect storm: some first attempts are refused and retried
        events.append(NodeEvent(node, t, "connect_attempt", {"attempt": 1, "error": "refused"}))
        t += rng.uniform(0.01, 0.02)
    events += [
        NodeEvent(node, t, "connect_attempt", {"attempt": 1 + retried, "error": None}),
        NodeEvent(node, t + 0.002, "connected", {"attempts": 1 + retried}),
        rdzv(t + 0.003, "join_start", world_size=nodes),
        rdzv(t + 0.006 + rng.uniform(0, 0.004), "joined", joined=node + 1, world_size=nodes),
    ]
    done = 6.2 + rng.uniform(0.0, 0.3)
    events += [
        rdzv(done, "complete", world_size=nodes),
        NodeEvent(node, done + 0.002, "returned", {"rank": node}),
        rdzv(done + 0.15 + rng.uniform(0.0, 0.1), "shutdown", others_left=0, others=0, error=None),
    ]
    return NodeOutcome(
        node=node,
        status="ok",
        rank=node,
        world_size=nodes,
        run_id=run_id,
        started=launched,
        finished=events[-1].t + 0.01,
        pid=20000 + node,
        events=events,
        shared_store_ok=True,
        seen_ranks=None,
        maxrss_kib=23000 + node % 100,
    )


def scale_report(nodes: int = 4096, expect_ok_everywhere: bool = False) -> Report:
    """A realistic large run: every node has its ~9 events (started, connect attempt,
    connected, join_start, joined, complete, returned, shutdown) and its outcome; a latency
    toxic on every link, every 7th node's first connect refused, one straggler (slowed by a
    toxic of its own) that times out, and a handful of nodes killed after they joined.

    The violations are what :func:`harness.run.checks.check` finds: none beyond the killed
    nodes and the straggler (expected), or, with ``expect_ok_everywhere``, every node that
    did not end ``ok``."""
    rng = random.Random(nodes)
    run_id = f"scale-{nodes}"
    outcomes = [_scale_ok(node, nodes, run_id, rng) for node in range(nodes)]
    straggler = nodes * 2 // 3
    killed = sorted({nodes // 16 * i + 5 for i in range(1, 6)} - {straggler})
    slow = outcomes[straggler]
    slow.events = [e for e in slow.events if e.event not in ("complete", "returned", "shutdown")]
    slow.events.append(
        NodeEvent(straggler, 8.0, "failed", {"error": "RendezvousTimeoutError", "rank": straggler})
    )
    slow.status, slow.finished, slow.rank, slow.world_size = "timeout", 8.01, None, None
    slow.error_class = "rdzv.errors.RendezvousTimeoutError"
    slow.message = (
        f"rank {straggler}: rendezvous round 0 timed out after 8.0 s waiting for the result "
        f"({nodes - 1} of {nodes} nodes joined)"
    )
    for node in killed:
        out = outcomes[node]
        out.events = [e for e in out.events if e.event not in ("complete", "returned", "shutdown")]
        out.status, out.finished, out.rank, out.world_size = "killed", 3.0, None, None
        out.message = "killed by the harness (SIGKILL)"
    latency = "latency downstream {'latency': 20, 'jitter': 10}"
    faults = [
        FaultRecord(
            0, "toxic", list(range(1, nodes)), 0.0, None, latency,
            acted={"connections delayed": nodes - 1},
        ),
        FaultRecord(
            1, "toxic", [straggler], 0.0, None, "timeout upstream {'timeout': 0}",
            acted={"connections black-holed": 1},
        ),
        FaultRecord(2, "kill", killed, 3.0, 3.0, "", acted={"nodes killed": len(killed)}),
    ]  # fmt: skip
    expect: dict[str, Any] = {"outcome": "ok"}
    if not expect_ok_everywhere:
        expect["nodes"] = [
            {"nodes": killed, "outcome": "killed"},
            {"nodes": [straggler], "outcome": "timeout"},
        ]
    sc = scenario(f"scale-{nodes}", nodes, expect=expect)
    report = Report(sc, 4096, outcomes, faults, duration=7.2)
    report.violations = check(sc, outcomes)
    return report


def straggler_report(nodes: int = 4096) -> Report:
    """The straggler arrives after the deadline; everyone else times out naming exactly its
    rank. The scenario expected every node ``ok``: every node violates ``outcome``."""
    report = scale_report(nodes)
    straggler = nodes * 2 // 3
    missing = f"rendezvous round 0 timed out after 8.0 s: {nodes - 1} of {nodes} nodes joined; "
    for out in report.outcomes:
        out.events = [e for e in out.events if e.event not in ("complete", "returned", "shutdown")]
        out.events = [e for e in out.events if not (e.node == straggler and e.event == "joined")]
        out.rank = out.world_size = None
        if out.node == straggler:
            out.status, out.finished = "connection_error", 9.5
            out.error_class = "rdzv.errors.RendezvousConnectionError"
            out.message = (
                f"rank {out.node}: no rendezvous server answered at 127.0.0.1:41234 "
                "(connection refused) within 1.5 s"
            )
        elif out.status != "killed":
            out.events.append(
                NodeEvent(out.node, 8.0, "failed", {"error": "RendezvousTimeoutError"})
            )
            out.status, out.finished = "timeout", 8.01
            out.error_class = "rdzv.errors.RendezvousTimeoutError"
            out.message = f"{missing}missing ranks: {straggler}"
    sc = scenario(f"straggler-{nodes}", nodes, expect={"outcome": "ok"})
    report.scenario = sc
    report.faults = [f for f in report.faults if f.index != 1]
    report.violations = check(sc, report.outcomes)
    return report


def noisy_straggler_report(nodes: int = 1024) -> Report:
    """:func:`straggler_report` where each node's message also carries its own pid, its
    store connection's port and how long it waited: lines that differ only by numbers."""
    report = straggler_report(nodes)
    rng = random.Random(nodes)
    for out in report.outcomes:
        if out.status == "timeout":
            out.message += (
                f"\n  pid {4000 + out.node * 7}, store connection 127.0.0.1:41234 from port "
                f"{30000 + rng.randrange(20000)}\n  waited {7.5 + rng.random() / 2:.2f} s for "
                "round/0/done"
            )
    report.violations = check(report.scenario, report.outcomes)
    return report
