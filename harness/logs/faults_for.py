"""One cause seen on some nodes -> the fault that makes them see it (plan's rule 4).

:func:`fault_for` returns the ``[[fault]]`` entry, the reason, what the scenario must
change besides (the endpoint's host name for a DNS fault) and the assumption made, if any.

The network's causes map to the world the scenario runs in: in the netns world (the log
says the nodes ran in network namespaces of their own, or the user asked with ``--world
netns``) to the kernel's own faults (``drop`` of the SYNs, ``reject`` with a reset or a
host-unreachable); in the local world to its proxy links' equivalents (a black-hole link, a
link that is down), each with the assumption named.
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
    assumptions: list[str] = field(default_factory=list)


_BLACK_HOLE = (
    "connects that got no answer are a black-hole link in the local world (the netns "
    "world's `drop` of the SYNs is the kernel's version: --world netns)"
)
_NO_ROUTE = (
    "the local world has no routes to lose: 'no route to host' is replayed as a link that "
    "is down (the connect fails at once, a connection_error either way); --world netns "
    "replays it with the kernel's host-unreachable"
)
_RESET = {"type": "reset_peer", "stream": "upstream", "attributes": {"timeout": 0}}


def _kernel(kind: str, nodes: list[int]) -> Mapped | None:
    """The netns world's fault for a network cause, or None when it has none of its own."""
    which = f"node(s) {nodes}"
    if kind in ("connect_timeout", "silent"):
        return Mapped(
            {"kind": "drop", "nodes": nodes, "ports": ["store"]},
            f"the kernel dropped {which}' connection attempts to the store's port (no answer)",
        )
    if kind in ("refused", "no_route"):
        answer = "reset" if kind == "refused" else "unreachable"
        said = "refused them" if kind == "refused" else "answered host-unreachable"
        return Mapped(
            {"kind": "reject", "nodes": nodes, "answer": answer},
            f"the store host's firewall {said} ({which}; the kernel's reject-{answer})",
        )
    return None


def fault_for(kind: str, nodes: list[int], named_host: str | None, world: str = "local") -> Mapped:
    """The fault that makes ``nodes`` meet cause ``kind`` in ``world`` (``local`` or
    ``netns``); ``named_host``: the host name the log could not resolve, if it names one."""
    if world == "netns" and (kernel := _kernel(kind, nodes)) is not None:
        return kernel
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
            {"kind": "link_down", "nodes": nodes, "at": 0},
            f"{which} had no route to the store host",
            assumptions=[_NO_ROUTE],
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
        entry = {"kind": "store_op", "nodes": nodes, "op": _OPS.get(op, "*"), "action": action}
        # one request of each node (a rule's count is over all its nodes)
        return Mapped(
            entry | ({"count": len(nodes)} if len(nodes) > 1 else {}),
            f"the store {verb} {which} on {op}",
        )
    return Mapped(None, f"{which}: cause {kind!r} maps to no fault")
