"""Who never came, who held a key back, who restarted: plan's rules for missing ranks.

* :func:`absent`: nodes named missing, a store barrier short of workers (which nodes: those
  the log does not show), node 0 when nothing listened, nodes silent where every node logs,
  the nodes not in a log whose every node timed out joining and said nothing else;
* :func:`held_keys`: a key waited for in vain -> the rank holding it back;
* :func:`unanswered`: a node named missing that had connected, its last store request
  unanswered until the round ended -> the store never answered that request;
* :func:`verdict_unanswered`: a node that joined a round the host completed and timed out
  without reading the verdict -> the store never answered its wait for it;
* :func:`stale_barrier`: a barrier over the world size -> a restart (stale keys);
* :func:`restarted`: a node whose log starts again (a second ``started``, another pid)
  -> a restart after the last event of its first life.
"""

from __future__ import annotations

import re
from typing import Any

from harness.logs.facts import TRIGGERS, Facts, NodeFacts
from harness.logs.faults_for import fault_for
from harness.logs.lines import Line
from harness.logs.planned import Plan, PlannedFault

__all__ = ["absent", "held_keys", "restarted", "stale_barrier", "unanswered", "verdict_unanswered"]


def absent(plan: Plan, facts: Facts, everyone_logs: bool) -> set[int]:
    absent: set[int] = set()
    for node in facts.nodes:
        if node.outcome == "absent" or (
            not node.seen and (node.node in facts.missing or everyone_logs)
        ):
            absent.add(node.node)
    host = facts.node(0)
    nothing_listened = [
        c
        for n in facts.nodes[1:]
        if n.connected_at is None
        for c in n.causes
        if c.data["cause"] in ("refused", "reset")
    ]
    if not host.seen and 0 not in absent and nothing_listened:
        absent.add(0)
        plan.assumptions.append(
            "node 0 (the store host) is not in the log and the others' connects were refused or "
            f"reset ({nothing_listened[0].line.where}): nothing listened, so node 0 never started "
            "(or never bound its port)"
        )
    short = [b for b in facts.barriers if b.data["worker_count"] < b.data["world_size"]]
    if short and not absent:
        per = facts.workers_per_node or 1
        lacking = (short[0].data["world_size"] - short[0].data["worker_count"] + per - 1) // per
        unseen = [n.node for n in facts.nodes if not n.seen]
        chosen = unseen[-lacking:]
        absent.update(chosen)
        counted = f"the store barrier counted {short[0].data['worker_count']} of "
        counted += f"{short[0].data['world_size']} workers"
        if chosen:
            plan.assumptions.append(
                f"{counted}: {lacking} node(s) never arrived; the log does not say which, so "
                f"node(s) {sorted(chosen)}, of those the log does not show"
            )
        else:
            plan.not_reproduced.append(
                f"{counted}, yet every node is in the log: workers that never reached the "
                "barrier (job-level)"
            )
    alone = _alone_timed_out(facts) if not absent else []
    if alone:
        unseen = [n.node for n in facts.nodes if not n.seen]
        absent.update(unseen)
        plan.assumptions.append(
            f"every node in the log timed out joining ({alone[0].where}), none names who was "
            "missing and none met a network error: the node(s) not in the log, "
            f"{unseen}, never started"
        )
    if absent:
        lines = [
            o.line
            for n in facts.nodes
            if n.stream
            for o in n.stream.observations
            if o.kind == "missing"
        ][:1]
        lines += [n.outcome_line for n in facts.nodes if n.outcome == "absent" and n.outcome_line]
        lines += [b.line for b in short[:1]] + alone[:1]
        lines += [c.line for c in nothing_listened[:1] if 0 in absent and not host.seen]
        plan.faults.append(
            PlannedFault(
                {"kind": "absent", "nodes": sorted(absent)},
                f"node(s) {sorted(absent)} never arrived",
                lines,
            )
        )
    return absent


def _alone_timed_out(facts: Facts) -> list[Line]:
    """The lines where each node of the log timed out joining, when that is all the log
    says went wrong (no missing ranks, barrier, network cause or other ending) and some
    node is not in it; else none."""
    seen = [n for n in facts.nodes if n.seen]
    if (
        not seen
        or len(seen) == len(facts.nodes)
        or facts.missing
        or facts.barriers
        or any(n.causes or n.died for n in seen)
    ):
        return []
    ends = [n.outcome_line for n in seen if n.outcome == "timeout"]
    joining = [line for line in ends if line is not None and "endezvous" in line.text]
    return joining if len(joining) == len(seen) else []


def held_keys(plan: Plan, facts: Facts, absent: set[int]) -> None:
    """A key waited for in vain: the rank that should have published it holds it back."""
    waits = [(n.node, c) for n in facts.nodes for c in n.causes if c.data["cause"] == "key_wait"]
    if not waits or absent or "killed" in plan.expect.values():
        return  # a node that never came or died explains the wait
    waiters = {node for node, _ in waits}
    key = str(waits[0][1].data.get("key", ""))
    named = re.search(r"(\d+)$", key)
    if named and 0 < int(named[1]) < len(facts.nodes) and int(named[1]) not in waiters:
        holder, how = int(named[1]), f"the key {key!r} names rank {named[1]}"
    else:
        unseen = [n.node for n in facts.nodes[1:] if not n.seen]
        others = [n.node for n in facts.nodes[1:] if n.node not in waiters]
        if not (unseen or others):
            plan.assumptions.append(
                f"a key was never published ({waits[0][1].line.where}) but every node waited "
                "for it: no rank to hold it back"
            )
            return
        holder = (unseen or others)[-1]
        how = "the log does not say whose key it was: the last rank " + (
            "the log does not show" if unseen else "that did not wait"
        )
    plan.assumptions.append(f"the key never published was node {holder}'s: {how}")
    mapped = fault_for("key_wait", [holder], None)
    assert mapped.entry is not None
    plan.faults.append(PlannedFault(mapped.entry, mapped.why, [c.line for _, c in waits[:2]]))
    plan.expect[holder] = "timeout"
    plan.held = holder


#: The store request a node's failure names: rdzv's "while calling compare_set", or its
#: client's "(EOF) during COMPARE_SET".
_PENDING = re.compile(r"while calling (?P<call>[a-z_]+)|during (?P<op>[A-Z][A-Z_]+)\b")


def unanswered(plan: Plan, facts: Facts, absent: set[int]) -> None:
    """Nodes the log names missing although they connected to the store, whose failure names
    the store request they were in (``while calling compare_set``, ``(EOF) during
    COMPARE_SET``) and that no other fault explains: the store never answered that request
    (their claim never landed), though the connection stayed up until the round ended and
    the host closed it. Adds a ``store_op`` drop of that request."""
    groups: dict[str, list[NodeFacts]] = {}
    for node in _unexplained(plan, facts, absent):
        if (
            node.node not in facts.missing
            or node.connected_at is None
            or node.outcome not in ("timeout", "connection_error")
        ):
            continue
        pending = _PENDING.search(node.message)
        if pending is not None:
            groups.setdefault(pending["call"] or pending["op"].lower(), []).append(node)
    for call, nodes in groups.items():
        why = "(named missing, though connected to it until the round ended)"
        _drop(plan, call, nodes, why)


def verdict_unanswered(plan: Plan, facts: Facts, absent: set[int]) -> None:
    """Nodes that joined a round the store host completed before they ended, and timed out
    without reading the verdict, no other fault on them: the store never answered their wait
    for it (rdzv's verdict WAIT, the first a member sends), nor each late read their log
    says found nothing (``verdict_read_late ... found=False``). Adds a ``store_op`` drop of
    that many WAITs."""
    completed = [o.line.when for o in facts.node(0).observations if o.kind == "complete"]
    if not completed or completed[0] is None:
        return
    nodes = [
        node
        for node in _unexplained(plan, facts, absent)
        if node.joined
        and node.outcome == "timeout"
        and not any(o.kind == "complete" for o in node.observations)  # it read the verdict
        and (node.last_time is None or node.last_time >= completed[0])
    ]
    late = sum(
        "verdict_read_late" in x.text and "found=False" in x.text
        for node in nodes
        for x in (node.stream.lines if node.stream else [])
    )
    if nodes:
        why = "(the wait for the verdict of a round node 0 completed)"
        _drop(plan, "wait", nodes, why, count=len(nodes) + late)


def _unexplained(plan: Plan, facts: Facts, absent: set[int]) -> list[NodeFacts]:
    """The nodes but the host that came, whose end no planned fault or expectation explains
    yet (lateness explains no unanswered request)."""
    covered = absent | plan.faulted(besides="late_start") | set(plan.expect)
    return [node for node in facts.nodes[1:] if node.node not in covered]


def _drop(plan: Plan, call: str, nodes: list[NodeFacts], why: str, count: int = 0) -> None:
    """A ``store_op`` drop of ``call`` on ``nodes`` (one request each, or ``count``)."""
    mapped = fault_for(f"store_drop:{call}", [n.node for n in nodes], None)
    if mapped.entry is None:
        plan.assumptions.append(mapped.why)
        return
    entry = mapped.entry | ({"count": count} if count > 1 else {})
    lines = [n.outcome_line for n in nodes[:2] if n.outcome_line]
    plan.faults.append(PlannedFault(entry, f"{mapped.why} {why}", lines))


def stale_barrier(plan: Plan, facts: Facts) -> None:
    """A store barrier that counted more workers than the world has: keys of an earlier
    attempt were still in the store after a restart."""
    over = [b for b in facts.barriers if b.data["worker_count"] > b.data["world_size"]]
    if not over:
        return
    node = len(facts.nodes) - 1
    plan.faults.append(
        PlannedFault(
            {"kind": "restart", "nodes": [node], "on": "joined", "on_node": node},
            f"the store barrier counted {over[0].data['worker_count']} workers of "
            f"{over[0].data['world_size']}: stale keys of an attempt before a restart",
            [over[0].line],
        )
    )
    plan.assumptions.append(
        f"the log does not say which node restarted: node {node} restarts once it joined"
    )
    plan.not_reproduced.append(
        "the over-count itself: rdzv's rendezvous starts each round on fresh keys, so the "
        "replay shows the restart, not torch's barrier counting stale keys"
    )


def restarted(plan: Plan, facts: Facts) -> None:
    """A node whose log says ``started`` again with another pid was restarted: it ends (on
    the last event of its first life it can be triggered on, plus what it logged after) and
    starts again as long after as its log shows."""
    for node in facts.nodes:
        stream = node.stream
        if stream is None or node.node in plan.expect:
            continue
        starts = [o for o in stream.observations if o.kind == "started"]
        pids = {o.data.get("pid") for o in starts}
        if len(starts) < 2 or len(pids) < 2:
            continue
        again = starts[1]
        before = [o for o in stream.observations if o.line.lineno < again.line.lineno]
        trigger = next((o for o in reversed(before) if o.kind in TRIGGERS), None)
        if trigger is None or trigger.line.when is None or again.line.when is None:
            continue
        last = max(o.line.when for o in before if o.line.when is not None)
        entry: dict[str, Any] = {"kind": "restart", "nodes": [node.node], "on": trigger.kind}
        entry |= {
            "on_node": node.node,
            "duration": max(0.1, round((again.line.when - last) * plan.scale, 1)),
        }
        if (after := round((last - trigger.line.when) * plan.scale, 2)) > 0:
            entry["after"] = after
        plan.faults.append(
            PlannedFault(
                entry,
                f"node {node.node} started again (pid {again.data.get('pid')}) after its "
                f"'{trigger.kind}' event",
                [trigger.line, again.line],
            )
        )
