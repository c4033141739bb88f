"""From facts to a scenario's parts: overrides, faults, expectations, each with its reason.

The rules, in the order they are tried (torch-logs.md's error table):

1. A node the log names missing (``missing ranks``, a store barrier short of workers), or a
   node with no line where every node logs (one file per node, rdzv's events of several
   nodes, a harness report), was never started: ``absent`` (:mod:`~harness.logs.missing`).
   A node that is merely not in a pasted log is not checked (any outcome but ``absent``).
2. The store host: ``EADDRINUSE`` -> a ``squatter`` on its port (``http`` when the others
   met an HTTP reply); its log ending after it joined, or a signal -> ``kill`` on its last
   event.
3. Lateness: a node that began its rendezvous well after the first -> ``late_start``.
4. Each other node's causes while the store host was up (not before it began, not after it
   died): a name that does not resolve -> ``dns``; no answer to a connect -> a black-hole
   ``toxic`` (timeout 0; in the netns world the kernel's ``drop``); no route -> a
   ``link_down`` (in the netns world ``reject`` answering host-unreachable); refused ->
   ``link_down`` (in the netns world ``reject`` with a reset); reset before connecting -> a
   ``reset_peer`` toxic; after connecting, attempts to dial again that failed -> the same
   path faults from then (:mod:`~harness.logs.peers`); else a request that got no reply or
   a reset -> ``store_op`` (drop / fail) on that request; a key waited for in vain -> ``store_op``
   dropping the holder's claim; a node named missing though it connected, its failure
   naming the request it was in -> ``store_op`` drop of that request (its claim never
   landed). Such a node that began with the host ends either way in the replay (timeout or
   connection error: its deadline races the host's), so it is expected to. A node that
   joined a round the host completed and timed out without its verdict -> ``store_op``
   drop of its verdict's WAIT.
   A cause that ended (the node connected later) gives the fault that ``duration``.
5. A node whose log starts again with another pid -> ``restart`` after its first life;
   a duplicate rank claim or a world size that differs from the rest -> an ``override``.
6. A peer whose log ends without an outcome, or with a signal -> ``kill`` on its last event.

Times are seconds from the first line of the log, scaled with the timeouts (minutes become
seconds when a stated timeout is over 60 s or the log spans minutes).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.logs.facts import Facts, NodeFacts
from harness.logs.missing import absent as absent_nodes
from harness.logs.missing import (
    held_keys,
    restarted,
    stale_barrier,
    unanswered,
    verdict_unanswered,
)
from harness.logs.peers import peer_causes, racing_the_host
from harness.logs.planned import ANY, LATE, MAX_NODES, RACE, RACED, Plan, PlannedFault, plan_time

__all__ = ["plan"]


def _store_host(
    plan: Plan, facts: Facts, absent: set[int]
) -> tuple[float | None, float | None, bool]:
    """Faults of node 0; returns when it listened and died (the log's clock) and whether a
    squatter holds its port."""
    host = facts.node(0)
    if 0 in absent:  # nothing listened: every connect failure before is explained
        return float("inf"), None, False
    in_use = [c for c in host.causes if c.data["cause"] == "addr_in_use"]
    if in_use:
        if plan.world == "netns":
            plan.world = "local"
            plan.assumptions.append(
                "a port held by another process needs the local world (the netns world runs "
                "no squatter in node 0's namespace): the scenario runs locally"
            )
        http = [c for n in facts.nodes for c in n.causes if c.data["cause"] == "not_a_store"]
        mode = "http" if http else "ipv4-wildcard"
        plan.faults.append(
            PlannedFault(
                {"kind": "squatter", "mode": mode},
                f"another process held the store's port ({mode})",
                [in_use[0].line] + [h.line for h in http[:1]],
            )
        )
        return None, None, True
    if host.died is not None or (host.outcome is None and host.seen and _peers_ended(facts)):
        _kill(plan, facts, host, "the store host died")
    died_at = host.last_time  # once node 0 ended, its store was gone
    listening = (
        [o.line.when for o in host.stream.observations if o.kind == "store_host"]
        if host.stream
        else []
    )
    return (listening[0] if listening else host.begin), died_at, False


def _peers_ended(facts: Facts) -> bool:
    return any(n.outcome not in (None, "absent") for n in facts.nodes[1:])


def _kill(plan: Plan, facts: Facts, node: NodeFacts, why: str) -> float | None:
    entry: dict[str, Any] = {"kind": "kill", "nodes": [node.node]}
    lines = (
        [node.died.line]
        if node.died is not None
        else ([node.stream.lines[-1]] if node.stream and node.stream.lines else [])
    )
    if node.last_trigger is not None:
        event, when = node.last_trigger
        entry.update(on=event, on_node=node.node)
        after = (
            None
            if when is None or node.last_time is None
            else round((node.last_time - when) * plan.scale, 2)
        )
        if after:
            entry["after"] = after
        reason = f"{why}: its log ends after its '{event}' event" + (
            f" (+{after} s)" if after else ""
        )
    else:
        at = plan_time(plan, facts, node.last_time)
        entry["at"] = at or 0.0
        reason = f"{why}: its log ends at {entry['at']} s"
    plan.faults.append(PlannedFault(entry, reason, lines))
    plan.expect[node.node] = "killed"
    return plan_time(plan, facts, node.last_time)


def _late(plan: Plan, facts: Facts, absent: set[int]) -> None:
    begins = {n.node: plan_time(plan, facts, n.begin) for n in facts.nodes if n.node not in absent}
    known = [b for b in begins.values() if b is not None]
    if not known:
        return
    first = min(known)
    for node, begin in begins.items():
        if begin is not None and begin - first >= LATE:
            stream = facts.node(node).stream
            lines = [next(line for line in stream.lines if line.when is not None)] if stream else []
            plan.faults.append(
                PlannedFault(
                    {"kind": "late_start", "nodes": [node], "delay": round(begin - first, 1)},
                    f"node {node} began {begin - first:.1f} s after the first",
                    lines,
                )
            )


def _overrides(plan: Plan, facts: Facts) -> None:
    sizes = Counter(n.world for n in facts.nodes if n.world is not None)
    common = sizes.most_common(1)[0][0] if sizes else None
    for node in facts.nodes:
        entry: dict[str, Any] = {"nodes": [node.node]}
        stream = node.stream
        if stream is not None and stream.claimed_rank is not None:
            entry["rank"] = stream.claimed_rank
        if node.world is not None and common is not None and node.world != common:
            entry["world_size"] = node.world
        if len(entry) > 1 and stream is not None:
            lines = [o.line for o in stream.observations if o.kind in ("rank", "world")][:1]
            plan.overrides.append(
                PlannedFault(entry, f"node {node.node} was configured differently: {entry}", lines)
            )


def _shrink(plan: Plan) -> None:
    """Keep MAX_NODES nodes: node ``i`` becomes ``i * MAX_NODES // nodes`` everywhere."""
    before = plan.nodes

    def to(node: int) -> int:
        return node * MAX_NODES // before

    for planned in plan.faults + plan.overrides:
        if isinstance(planned.entry.get("nodes"), list):
            planned.entry["nodes"] = sorted({to(n) for n in planned.entry["nodes"]})
        if "on_node" in planned.entry:
            planned.entry["on_node"] = to(planned.entry["on_node"])
    expect: dict[int, str] = {}
    for node, outcome in sorted(plan.expect.items()):
        if expect.get(to(node), ANY) == ANY:
            expect[to(node)] = outcome
    plan.expect = expect
    plan.missing = sorted({to(r) for r in plan.missing})
    plan.name_missing = {to(n) for n in plan.name_missing}
    plan.held = to(plan.held) if plan.held is not None else None
    plan.nodes = MAX_NODES
    plan.assumptions.append(
        f"{before} nodes do not fit one machine: the scenario has {MAX_NODES}, node i of the "
        f"log being node i * {MAX_NODES} // {before} (so rank 0 stays the store host)"
    )


def plan(facts: Facts, everyone_logs: bool, world: str = "local") -> Plan:
    """The scenario's parts for ``facts``; ``everyone_logs``: every node that ran wrote to
    the log (rdzv's events, the harness's node logs), so a silent node was never started;
    ``world``: where the network's causes are replayed (``local`` or ``netns``)."""
    join = facts.join_timeout
    times = [n.first for n in facts.nodes if n.first is not None] + [
        n.last_time for n in facts.nodes if n.last_time is not None
    ]
    span = max(times) - min(times) if times else 0.0
    # a stated timeout of minutes, or a log spanning minutes: minutes become seconds (every
    # time keeps its ratio); an assumed default with a log of seconds keeps the log's times
    scale = 1 / 60 if (join > 60 and facts.join_stated) or span > 60 else 1.0
    shrunk = join * scale if scale != 1.0 else (join / 60 if join > 60 else join)
    # an assumed timeout: at least what the log took (nodes that timed out took all of it)
    timed_out = any(n.outcome == "timeout" for n in facts.nodes)
    floor = 1.0 if facts.join_stated else round(span * scale + (0 if timed_out else 2), 1)
    result = Plan(nodes=len(facts.nodes), join=max(floor, round(shrunk, 1)), scale=scale)
    result.world = world
    if scale != 1.0:
        result.assumptions.append(
            f"timeouts scaled down 60 times to fit one run (join {join:g} s -> "
            f"{result.join:g} s); every time in the scenario keeps that ratio"
        )
    elif result.join != join:
        result.assumptions.append(
            f"the assumed {join:g} s join timeout is {result.join:g} s here (minutes become "
            "seconds); the log's times are seconds and are kept as they are"
        )
    absent = absent_nodes(result, facts, everyone_logs)
    begun, died, squatted = _store_host(result, facts, absent)
    _late(result, facts, absent | ({0} if squatted else set()))
    if not squatted:
        peer_causes(result, facts, (begun, died), absent)
    unanswered(result, facts, absent)
    racing = racing_the_host(result, facts)
    verdict_unanswered(result, facts, absent)  # no race: the round completed long before
    held_keys(result, facts, absent)
    stale_barrier(result, facts)
    restarted(result, facts)
    _overrides(result, facts)
    for node in facts.nodes[1:]:
        if node.node in absent or node.node in result.expect:
            continue
        if node.died is not None or (node.seen and node.outcome is None and _peers_ended(facts)):
            _kill(result, facts, node, f"node {node.node} died")
    for node in facts.nodes:
        if node.node in absent:
            result.expect[node.node] = "absent"
        elif node.node in result.expect:
            continue
        elif node.node in racing and node.outcome in RACED:
            result.expect[node.node] = RACE
        elif node.outcome is not None:
            result.expect[node.node] = node.outcome
        else:
            result.expect[node.node] = ANY
            result.assumptions.append(
                f"node {node.node} is not in the log: how it ends is not checked"
            )
    held = {result.held} if result.held is not None else set()
    result.missing = sorted(facts.missing) or sorted((absent - {0}) | held)
    said = {n.node for n in facts.nodes if "missing rank" in n.message}
    timeouts = {n for n, outcome in result.expect.items() if outcome == "timeout"}
    result.name_missing = said or (timeouts - held if result.missing else set())
    if result.nodes > MAX_NODES:
        _shrink(result)
    return result
