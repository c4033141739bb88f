"""Plan's rule 4: each node's causes while the store host was up -> the fault that makes it
meet them (:func:`peer_causes`), and which of those nodes race the host's deadline
(:func:`racing_the_host`).

A cause before the node first connected is the path's from the start (``link_down``, a
black hole, ``dns``, ...), ending when the node connected, if it did. After it connected:

* connect attempts refused, unanswered or unroutable (the node dialled again, its
  connection gone) -> the path went down then: the same fault, from the first sign of it
  (the lost connection or the first failed attempt), until the node connected again;
* else a request that got no reply, or a reset during one -> ``store_op`` (drop / fail) on
  that request.
"""

from __future__ import annotations

import re

from harness.logs.facts import Facts, NodeFacts
from harness.logs.faults_for import fault_for
from harness.logs.planned import LATE, Plan, PlannedFault, plan_time
from harness.logs.signals import Observation

__all__ = ["peer_causes", "racing_the_host"]

_CALLING = re.compile(r"while calling (?P<op>[a-z_]+)")
#: Causes the store host's absence or lateness does not explain.
_NOT_THE_STORES = ("dns", "no_route")
#: Causes of a connect attempt that say the path to the store is down.
_PATH_DOWN = ("refused", "no_route", "connect_timeout")

#: One node's planned cause: (node, the observation, when it began, when it recovered),
#: the times in the scenario's seconds (None: from the start / never).
_Member = tuple[int, Observation, float | None, float | None]


def peer_causes(
    plan: Plan, facts: Facts, window: tuple[float | None, float | None], absent: set[int]
) -> None:
    """Rule 4 (see the module doc); ``window``: when the store host listened and ended."""
    begun, died = window
    gave_up = _gave_up(facts.node(0))
    groups: dict[tuple[str, bool, str, float | None], list[_Member]] = {}
    for node in facts.nodes[1:]:
        if node.node in absent or node.node in plan.expect:
            continue
        planned = _node_cause(plan, facts, node, (begun, died, gave_up))
        if planned is None:
            continue
        kind, last, at, recovered = planned
        key = (kind, recovered is not None, last.data.get("key", ""), at)
        groups.setdefault(key, []).append((node.node, last, at, recovered))
    for (kind, _, _, at), members in groups.items():
        _add(plan, facts, kind, at, members)


def _gave_up(host: NodeFacts) -> float | None:
    """When the store host's round timed out (its first error's time), if it did: a
    connection it closed or reset from then on is its giving up, whether its store lingered
    (for the acks) or not, and its own lines say when it stopped the store. (Not a round
    that failed on a member's published loss: that member's own reset came first.)"""
    if host.outcome != "timeout":
        return None
    failed = [o.line.when for o in host.observations if o.kind == "error"]
    return min((t for t in failed if t is not None), default=None)


def _node_cause(
    plan: Plan,
    facts: Facts,
    node: NodeFacts,
    host: tuple[float | None, float | None, float | None],
) -> tuple[str, Observation, float | None, float | None] | None:
    """The node's cause to reproduce: (kind, its last observation, began, recovered);
    ``host``: when the store host listened, ended and gave up on the round."""
    begun, died, gave_up = host
    connected = node.connected_at
    relevant: list[tuple[float | None, Observation]] = []
    for cause in node.causes:
        t = cause.line.when if cause.line.when is not None else node.last_time
        explained = (
            (begun is not None and (t is None or t < begun))
            or (died is not None and t is not None and t > died)
            or (
                gave_up is not None
                and t is not None
                and t >= gave_up
                and cause.data["cause"] == "reset"
            )
        )
        if explained and cause.data["cause"] not in _NOT_THE_STORES:
            continue
        relevant.append((t, cause))
    if not relevant:
        return None
    when, last = relevant[-1]
    after_connect = connected is not None and (when or 0) >= connected
    settling = (
        last.data["cause"] not in _NOT_THE_STORES
        and begun is not None
        and when is not None
        and when - begun < LATE / plan.scale
    )
    if connected is not None and not after_connect and settling:
        return None  # refused or reset while the store came up: the store's start explains it
    if connected is not None and after_connect:
        seen = node.observations
        attempts = {id(o.line) for o in seen if o.kind == "connect_attempt"}
        later = [(t, c) for t, c in relevant if t is not None and t >= connected]
        dialled = [
            (t, c) for t, c in later if id(c.line) in attempts and c.data["cause"] in _PATH_DOWN
        ]
        if dialled:  # the connection went, and so did the path: down from the first sign
            down, (failed, cause) = later[0][0], dialled[-1]
            again = [
                o.line.when
                for o in seen
                if o.kind == "connected" and o.line.when is not None and o.line.when > failed
            ]
            up = plan_time(plan, facts, failed) if again else None
            return cause.data["cause"], cause, plan_time(plan, facts, down), up
    kind = last.data["cause"]
    if after_connect and kind != "dns":
        op = _CALLING.search(last.line.text)
        dropped = kind in ("connect_timeout", "key_wait") or "did not answer" in last.line.text
        kind = f"store_{'drop' if dropped else 'fail'}:{op['op'] if op else '*'}"
        return kind, last, None, None
    if connected is not None:
        # Down at its last failed attempt, up when it connected: the fault ends at the
        # earliest the log allows, so that a replay's own backoff (random, up to a second
        # apart) finds the path open about when this node's did, not a pause later.
        healed = when if when is not None and when < connected else connected
        return kind, last, None, plan_time(plan, facts, healed)
    return kind, last, None, None


def _add(plan: Plan, facts: Facts, kind: str, at: float | None, members: list[_Member]) -> None:
    ends = [r for _, _, _, r in members if r is not None]
    recovered = max(ends) if ends else None
    nodes = sorted(n for n, _, _, _ in members)
    lines = [o.line for _, o, _, _ in members[:2]]
    mapped = fault_for(kind, nodes, facts.endpoint_host, plan.world)
    entry, why = mapped.entry, mapped.why
    plan.assumptions.extend(a for a in mapped.assumptions if a not in plan.assumptions)
    plan.endpoint_host = mapped.endpoint_host or plan.endpoint_host
    if entry is None:
        plan.assumptions.append(why)
        return
    timed = entry["kind"] in ("dns", "toxic", "link_down", "reject", "drop")
    if at and timed:
        entry["at"] = at
        why += f", from about {at} s (after they had connected: the connection went with it)"
    if recovered and timed:
        entry.setdefault("at", 0)
        entry["duration"] = max(0.1, round(recovered - float(entry["at"]), 1))
        why += f", until about {recovered} s (their last failed attempt; they connected after it)"
    plan.faults.append(PlannedFault(entry, why, lines))


def racing_the_host(plan: Plan, facts: Facts) -> set[int]:
    """The nodes whose store request the replay drops and that began with the store host
    (within :data:`LATE`: the replay starts them together): their join deadline is the
    host's, so whether they time out waiting or the host gives up first and closes their
    connection is a matter of milliseconds (the log shows one; a replay may show the
    other)."""
    host = facts.node(0).begin
    if host is None:
        return set()
    dropped = plan.faulted("store_op", "drop")
    return {
        n.node
        for n in facts.nodes[1:]
        if n.node in dropped
        and (begin := n.begin) is not None
        and abs(begin - host) * plan.scale < LATE
    }
