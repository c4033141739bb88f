"""The oracle: what every node of a scenario must report, derived from its faults alone.

Pure functions over a scenario's plain ``dict`` (the TOML form); no clock, no randomness.
It names no fault kind: each fault's kind says what it may do
(:meth:`~harness.scenario.faults.base.Fault.effect`, an
:class:`~harness.scenario.faults.fuzzing.Effect`: harmless or not, the outcomes it adds on
which nodes, how long it holds a node) and which nodes it keeps from starting
(:meth:`~harness.scenario.faults.base.Fault.never_starts`). The rules are the rendezvous
semantics of docs/rendezvous.md, as the scenario files under ``scenarios/`` prove them (J is
the join timeout):

1. Node 0 never starts: nobody hosts the store, so every present node fails with
   ``connection_error`` ("no rendezvous store answered") at its own deadline.
2. A misconfigured node (a worker claiming another worker's rank, or a larger world size),
   with only harmless faults: every node fails at once with ``state_error``; the duplicate's
   claimants name the rank, the mismatch names both sizes.
3. Some workers never start, only harmless faults: every present node fails with
   ``timeout``, naming the missing ranks ("missing ranks: 2-3.").
4. Only harmless faults: every node ``ok``.
5. Otherwise (kills, pauses, restarts, link downs, resets, black holes, drops, long
   latency, starts late past J/4, packet rules, ...) the outcome is legitimately open: a
   list of the outcomes that can happen. ``ok`` is never allowed while a node is absent (a
   round never completes without every rank); each fault adds the outcomes its kind allows
   on its nodes (``killed`` on a kill's targets, ``state_error`` on a restart's: a
   replacement arriving after its round ended).

One rule needs the run's recorded order, not just the faults: a member killed before a node
the round needs started leaves no node's rendezvous free to return (``dead_member``,
:mod:`harness.fuzz.ordered`); the outcome lists here stay open for it.

Every node that may fail carries an ``elapsed`` bound ``[0, 2*J + 15 + what holds it]``: no
operation may block past its deadline plus generous slack (the hosting node's exit barrier
may add up to 10 s after a failed round), plus the time faults hold the node still (pauses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report.fold import node_ranges
from harness.scenario.faults.base import Fault
from harness.scenario.faults.fuzzing import Effect, Outline
from harness.scenario.faults.registry import FAULTS
from harness.scenario.format import shown

__all__ = [
    "allowed_for",
    "effects",
    "expect_for",
    "faults_of",
    "hard_deadline_for",
    "outline_of",
    "summary",
]

_OPEN = ("ok", "timeout", "connection_error")
_SLACK = 15.0


def _join(data: Mapping[str, Any]) -> float:
    return float(data.get("timeouts", {}).get("join", 10.0))


def faults_of(data: Mapping[str, Any]) -> list[Fault]:
    """The faults of scenario ``data``, each as the model of its registered kind.

    Raises:
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    return [FAULTS.validate(table) for table in data.get("fault", [])]


def outline_of(data: Mapping[str, Any], faults: list[Fault] | None = None) -> Outline:
    """What a fault's kind may know of scenario ``data`` (node count, join timeout, endpoint
    host, the nodes that never start).

    Raises:
        KeyError: ``data`` lacks ``nodes``.
    """
    found = faults_of(data) if faults is None else faults
    return Outline(
        count=int(data["nodes"]),
        join=_join(data),
        host=str(data.get("endpoint", {}).get("host", "127.0.0.1")),
        absent=frozenset(n for fault in found for n in fault.never_starts()),
    )


def effects(data: Mapping[str, Any]) -> tuple[Outline, list[Effect]]:
    """Scenario ``data``'s outline and what each of its faults may do, in file order.

    Raises:
        KeyError: ``data`` lacks ``nodes``.
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    found = faults_of(data)
    outline = outline_of(data, found)
    return outline, [fault.effect(outline) for fault in found]


def allowed_for(data: Mapping[str, Any]) -> dict[int, tuple[str, ...]]:
    """Node -> the outcomes it may report (one outcome when the faults decide it).

    Raises:
        KeyError: ``data`` lacks ``nodes``.
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    outline, found = effects(data)
    absent = outline.absent
    calm = all(effect.harmless for effect in found)
    out: dict[int, tuple[str, ...]] = {}
    for node in range(outline.count):
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
        for effect in found:
            base += tuple(o for o in effect.allows.get(node, ()) if o not in base)
        out[node] = base
    return out


def _message(
    data: Mapping[str, Any], outline: Outline, node: int, allowed: tuple[str, ...]
) -> str | None:
    """The message pattern a node's single, decided failure must match."""
    count = int(data["nodes"])
    if allowed == ("connection_error",):
        return "no rendezvous store answered"
    if allowed == ("timeout",):
        missing = node_ranges(outline.absent)
        return f"missing ranks: {missing}\\."  # digits, '-' and ', ' need no escaping
    if allowed == ("state_error",):
        override = data["override"][0]
        if "rank" in override:
            claimants = {override["rank"], *override["nodes"]}
            return f"rank {override['rank']}" if node in claimants else None
        size = override["world_size"]
        return f"{count}.*{size}|{size}.*{count}"
    return None


def _held(found: list[Effect], node: int) -> float:
    """Seconds the faults may hold ``node`` still."""
    return sum(effect.holds.get(node, 0.0) for effect in found)


def hard_deadline_for(data: Mapping[str, Any]) -> float:
    """A hard deadline above every node's ``elapsed`` bound (so nobody is reported hung
    for a pause the scenario itself imposed).

    Raises:
        KeyError: ``data`` lacks ``nodes``.
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    outline, found = effects(data)
    longest = max((_held(found, n) for n in range(outline.count)), default=0.0)
    return round(2 * outline.join + _SLACK + 5 + longest, 1)


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
    outline, found = effects(data)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for node, allowed in allowed_for(data).items():
        message = _message(data, outline, node, allowed)
        can_fail = allowed not in (("ok",), ("absent",))
        high = round(2 * outline.join + _SLACK + _held(found, node), 1) if can_fail else None
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
    """One line: ``3 nodes, join 2.5 s, faults: absent [2], late_start [3] delay 1.2, kill
    [1] on joined of 1 +0.2 s, toxic latency [1] attributes {latency = 40}``: each fault as
    its kind labels it, its nodes, when it acts and for how long, and its other keys.

    Raises:
        KeyError: ``data`` lacks ``nodes``.
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    parts = [f"{data['nodes']} nodes", f"join {_join(data):g} s"]
    for override in data.get("override", []):
        what = "rank" if "rank" in override else "world_size"
        parts.append(f"node {override['nodes'][0]} {what} {override[what]}")
    tables = data.get("fault", [])
    faults = [_gist(table, fault) for table, fault in zip(tables, faults_of(data), strict=True)]
    parts.append(f"faults: {', '.join(faults) or 'none'}")
    return ", ".join(parts)


#: Keys :func:`_gist` shows in its own words (when the fault acts, for how long).
_TIMING = ("kind", "nodes", "at", "on", "on_node", "after", "duration")


def _gist(table: Mapping[str, Any], fault: Fault) -> str:
    """A fault in a few words: ``kill [1] on joined of 1 +0.2 s``."""
    words = [fault.label]
    if "nodes" in table:
        words.append(_plain(table["nodes"]))
    trigger = fault.when()
    if trigger is not None and trigger.on is not None:
        words.append(f"on {trigger.on} of {trigger.on_node} +{trigger.after:g} s")
    elif "at" in table:
        words.append(f"at {float(table['at']):g} s")
    if "duration" in table:
        words.append(f"for {float(table['duration']):g} s")
    said = set(fault.label.split())
    words += [
        f"{key} {_plain(value)}"
        for key, value in table.items()
        if key not in _TIMING and not (isinstance(value, str) and value in said)
    ]
    return " ".join(words)


def _plain(value: Any) -> str:
    """A key's value as TOML shows it, a lone string without its quotes."""
    return value if isinstance(value, str) else shown(value)
