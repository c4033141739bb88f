"""The oracle: what every node of a scenario must report, derived from its faults alone.

Pure functions over a scenario's plain ``dict`` (the TOML form); no clock, no randomness.
The rules are the rendezvous semantics of docs/rendezvous.md, as the scenario files under
``scenarios/`` prove them (J is the join timeout):

1. Node 0 absent: nobody hosts the store, so every present node fails with
   ``connection_error`` ("no rendezvous store answered") at its own deadline.
2. A misconfigured node (a worker claiming another worker's rank, or a larger world size),
   with only harmless faults: every node fails at once with ``state_error``; the duplicate's
   claimants name the rank, the mismatch names both sizes.
3. Some workers absent, only harmless faults: every present node fails with ``timeout``,
   naming the missing ranks ("missing ranks: 2-3.").
4. Only harmless faults: every node ``ok``.
5. Otherwise (kills, pauses, restarts, link downs, resets, black holes, drops, long
   latency, starts late past J/4) the outcome is legitimately open: a list of the outcomes
   that can happen. ``ok`` is never allowed while a node is absent (a round never completes
   without every rank); ``killed`` only for a kill's targets; ``state_error`` only for a
   restart's targets (a replacement arriving after its round ended).

One rule needs the run's recorded order, not just the faults: a member killed before a node
the round needs started leaves no node's rendezvous free to return (``dead_member``,
:mod:`harness.fuzz.ordered`); the outcome lists here stay open for it.

Harmless: latency + jitter at most J/50 (in ms: J*20), a slicer, a noop toxic, a late start
of at most J/4, store delays adding up to at most J/4.

Every node that may fail carries an ``elapsed`` bound ``[0, 2*J + 15 + its pauses]``: no
operation may block past its deadline plus generous slack (the hosting node's exit barrier
may add up to 10 s after a failed round).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "allowed_for",
    "expect_for",
    "format_ranks",
    "hard_deadline_for",
    "harmless",
    "summary",
]

_OPEN = ("ok", "timeout", "connection_error")
_SLACK = 15.0


def format_ranks(ranks: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``: how rdzv lists ranks in its messages."""
    spans: list[str] = []
    for rank in sorted(ranks):
        if spans and rank == int(spans[-1].split("-")[-1]) + 1:
            spans[-1] = f"{spans[-1].split('-')[0]}-{rank}"
        else:
            spans.append(str(rank))
    return ", ".join(spans)


def _join(data: Mapping[str, Any]) -> float:
    return float(data.get("timeouts", {}).get("join", 10.0))


def _targets(data: Mapping[str, Any], fault: Mapping[str, Any], default: str) -> list[int]:
    nodes = fault.get("nodes", default)
    count = int(data["nodes"])
    if nodes == "all":
        return list(range(count))
    if nodes == "others":
        return list(range(1, count))
    return sorted(set(nodes))


def harmless(fault: Mapping[str, Any], join: float) -> bool:
    """Whether ``fault`` cannot make a rendezvous with timeout ``join`` fail.

    Raises:
        KeyError: the fault lacks ``kind`` or a key its kind requires.
    """
    kind = fault["kind"]
    if kind == "late_start":
        return float(fault["delay"]) <= join / 4
    if kind == "toxic":
        kind_of_toxic = fault["type"]
        attributes = fault.get("attributes", {})
        if kind_of_toxic == "latency":
            spread = attributes.get("latency", 0) + attributes.get("jitter", 0)
            return bool(spread <= join * 20 and fault.get("duration") is None)
        return bool(kind_of_toxic in ("noop", "slicer") and attributes.get("delay", 0) <= 1000)
    if kind == "store_op":
        action, count = fault["action"], int(fault.get("count", 1))
        return bool(action == "delay" and float(fault.get("delay", 0)) * count <= join / 4)
    return False


def _absent(data: Mapping[str, Any]) -> set[int]:
    return {n for f in data.get("fault", []) if f["kind"] == "absent" for n in f["nodes"]}


def _targeted(data: Mapping[str, Any], kind: str) -> set[int]:
    return {n for f in data.get("fault", []) if f["kind"] == kind for n in f["nodes"]}


def allowed_for(data: Mapping[str, Any]) -> dict[int, tuple[str, ...]]:
    """Node -> the outcomes it may report (one outcome when the faults decide it).

    Raises:
        KeyError: ``data`` lacks ``nodes``, or a fault lacks a key its kind requires.
    """
    count, join = int(data["nodes"]), _join(data)
    absent = _absent(data)
    others = [f for f in data.get("fault", []) if f["kind"] != "absent"]
    calm = all(harmless(f, join) for f in others)
    killed, restarted = _targeted(data, "kill"), _targeted(data, "restart")
    out: dict[int, tuple[str, ...]] = {}
    for node in range(count):
        if node in absent:
            out[node] = ("absent",)
            continue
        if 0 in absent:
            base: tuple[str, ...] = ("connection_error",)
        elif data.get("override") and calm:
            base = ("state_error",)
        elif absent:
            base = ("timeout",) if calm else ("timeout", "connection_error")
        else:
            base = ("ok",) if calm else _OPEN
        if node in killed:
            base += ("killed",)
        if node in restarted and base != ("connection_error",):
            base += ("state_error",)
        out[node] = base
    return out


def _message(data: Mapping[str, Any], node: int, allowed: tuple[str, ...]) -> str | None:
    """The message pattern a node's single, decided failure must match."""
    count = int(data["nodes"])
    if allowed == ("connection_error",):
        return "no rendezvous store answered"
    if allowed == ("timeout",):
        missing = format_ranks(sorted(_absent(data)))
        return f"missing ranks: {missing}\\."  # digits, '-' and ', ' need no escaping
    if allowed == ("state_error",):
        override = data["override"][0]
        if "rank" in override:
            claimants = {override["rank"], *override["nodes"]}
            return f"rank {override['rank']}" if node in claimants else None
        size = override["world_size"]
        return f"{count}.*{size}|{size}.*{count}"
    return None


def _pauses(data: Mapping[str, Any], node: int) -> float:
    return sum(
        float(f.get("duration", 0))
        for f in data.get("fault", [])
        if f["kind"] == "pause" and node in f["nodes"]
    )


def hard_deadline_for(data: Mapping[str, Any]) -> float:
    """A hard deadline above every node's ``elapsed`` bound (so nobody is reported hung
    for a pause the scenario itself imposed).

    Raises:
        KeyError: ``data`` lacks ``nodes``, or a pause fault lacks ``nodes``.
    """
    join = _join(data)
    longest = max((_pauses(data, n) for n in range(int(data["nodes"]))), default=0.0)
    return round(2 * join + _SLACK + 5 + longest, 1)


def expect_for(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``expect`` table (TOML form) the faults of scenario ``data`` imply.

    Args:
        data: a scenario as a plain dict: ``nodes``, ``timeouts.join``, ``fault``,
            optionally ``override`` (at most one entry is understood).

    Returns:
        ``{"outcome": ..., "nodes": [...]}``: one entry per group of nodes that share an
        expectation; ``outcome`` is one outcome or a list of allowed ones; decided failures
        carry a message pattern; every node that may fail carries an ``elapsed`` bound.

    Raises:
        KeyError: ``data`` lacks ``nodes``, or a fault lacks a key its kind requires.
    """
    join = _join(data)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for node, allowed in allowed_for(data).items():
        message = _message(data, node, allowed)
        can_fail = allowed not in (("ok",), ("absent",))
        high = round(2 * join + _SLACK + _pauses(data, node), 1) if can_fail else None
        groups.setdefault((allowed, message, high), []).append(node)
    entries: list[dict[str, Any]] = []
    for (allowed, message, high), nodes in groups.items():
        entry: dict[str, Any] = {
            "nodes": nodes,
            "outcome": allowed[0] if len(allowed) == 1 else list(allowed),
        }
        if message is not None:
            entry["message"] = message
        if high is not None:
            entry["elapsed"] = [0.0, high]
        entries.append(entry)
    return {"outcome": entries[0]["outcome"], "nodes": entries}


def summary(data: Mapping[str, Any]) -> str:
    """One line: ``3 nodes, join 2.5 s, faults: absent [2], late_start [3] by 1.2 s, kill [1]
    on joined of 1 +0.2 s, toxic latency``.

    Raises:
        KeyError: ``data`` lacks ``nodes``, or a fault lacks ``kind``.
    """
    parts = [f"{data['nodes']} nodes", f"join {_join(data):g} s"]
    for override in data.get("override", []):
        what = "rank" if "rank" in override else "world_size"
        parts.append(f"node {override['nodes'][0]} {what} {override[what]}")
    faults = []
    for fault in data.get("fault", []):
        detail = fault.get("type") or fault.get("action") or ""
        if fault["kind"] in ("absent", "kill", "pause", "restart", "late_start"):
            detail = str(fault["nodes"])
        if fault["kind"] == "late_start":
            detail += f" by {float(fault['delay']):g} s"
        elif fault["kind"] in ("kill", "restart") and "on" in fault:
            detail += f" on {fault['on']} of {fault['on_node']} +{float(fault.get('after', 0)):g} s"
        faults.append(f"{fault['kind']} {detail}".strip())
    parts.append(f"faults: {', '.join(faults) or 'none'}")
    return ", ".join(parts)
