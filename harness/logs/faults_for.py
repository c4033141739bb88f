"""One cause seen on some nodes -> the fault that makes them see it (plan's rule 4).

:func:`fault_for` returns the ``[[fault]]`` entry, the reason, what the scenario must
change besides (the endpoint's host name for a DNS fault, the world for a fault only the
netns world has) and the assumption made, if any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Mapped", "fault_for"]

_OPS = {
    "compare_set": "COMPARE_SET",
    "add": "ADD",
    "get": "GET",
    "set": "SET",
    "wait": "WAIT",
    "multi_get": "MULTI_GET",
    "check": "CHECK",
}


@dataclass
class Mapped:
    """A cause's fault (None: the cause maps to none), and what comes with it."""

    entry: dict[str, Any] | None
    why: str
    endpoint_host: str | None = None
    world: str | None = None
    assumptions: list[str] = field(default_factory=list)


_BLACK_HOLE = (
    "connects that got no answer are a black-hole link in the local world (the netns "
    "world's `drop` of the SYNs is the kernel's version)"
)
_RESET = {"type": "reset_peer", "stream": "upstream", "attributes": {"timeout": 0}}


def fault_for(kind: str, nodes: list[int], named_host: str | None) -> Mapped:
    """The fault that makes ``nodes`` meet cause ``kind``; ``named_host``: the host name the
    log could not resolve, if it names one."""
    which = f"node(s) {nodes}"
    if kind == "dns":
        mapped = Mapped(
            {"kind": "dns", "nodes": nodes, "at": 0},
            f"the store's name did not resolve on {which}",
            endpoint_host=named_host or "store.rdzv.test",
        )
        if named_host is None:
            mapped.assumptions.append(
                "the log names no host that failed to resolve: the endpoint is called "
                "'store.rdzv.test'"
            )
        return mapped
    if kind in ("connect_timeout", "silent"):
        entry = {"kind": "toxic", "nodes": nodes, "type": "timeout", "stream": "upstream"}
        return Mapped(
            {**entry, "attributes": {"timeout": 0}},
            f"{which} got no answer from the store",
            assumptions=[_BLACK_HOLE],
        )
    if kind == "no_route":
        return Mapped(
            {"kind": "reject", "nodes": nodes, "answer": "unreachable"},
            f"{which} had no route to the store host (the netns world's host-unreachable)",
            world="netns",
        )
    if kind == "refused":
        return Mapped(
            {"kind": "link_down", "nodes": nodes, "at": 0},
            f"nothing listened where {which} connected",
        )
    if kind in ("reset", "not_a_store"):
        return Mapped(
            {"kind": "toxic", "nodes": nodes, **_RESET, "at": 0},
            f"{which} had their connections reset",
        )
    if kind == "key_wait":
        return Mapped(
            {"kind": "store_op", "nodes": nodes, "op": "COMPARE_SET", "keys": "*/claim/*"}
            | {"action": "drop"},
            f"a key was never published: {which} hold their claim back",
        )
    if kind.startswith("store_"):
        action, op = kind[len("store_") :].split(":")
        verb = "never answered" if action == "drop" else "reset"
        return Mapped(
            {"kind": "store_op", "nodes": nodes, "op": _OPS.get(op, "*"), "action": action},
            f"the store {verb} {which} on {op}",
        )
    return Mapped(None, f"{which}: cause {kind!r} maps to no fault")
