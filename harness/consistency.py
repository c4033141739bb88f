"""The checks of a scenario that need the whole file: node indexes that must exist and
faults that cannot apply where they are aimed.

:func:`consistency` returns every problem it finds, one line each in the key-path style of
:mod:`harness.explain`. :class:`harness.scenario.Scenario` runs it on a valid file; on an
invalid one, :func:`harness.scenario.parse` runs it on the parts that are valid on their own,
so a file's problems are all reported at once.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Protocol

from harness.explain import shown
from harness.faults import (
    AbsentFault,
    DnsFault,
    Fault,
    LateStartFault,
    LinkFault,
    Nodes,
    ProcessFault,
    SquatterFault,
    StoreOpFault,
    ToxicFault,
)

__all__ = ["consistency", "targets"]


class _Endpoint(Protocol):
    @property
    def host(self) -> str: ...
    @property
    def via_proxy(self) -> bool: ...


class _Selects(Protocol):
    """An ``[[override]]`` or ``[[expect.nodes]]`` entry: it names nodes."""

    @property
    def nodes(self) -> Nodes: ...


def targets(count: int, nodes: Nodes) -> list[int]:
    """Resolve a node selector of a ``count``-node scenario: a list, ``"all"`` or
    ``"others"`` (all but node 0)."""
    if nodes == "all":
        return list(range(count))
    if nodes == "others":
        return list(range(1, count))
    return sorted(set(nodes))


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def consistency(
    count: int,
    endpoint: _Endpoint | None,
    faults: Sequence[tuple[int, Fault]],
    overrides: Sequence[tuple[int, _Selects]],
    expects: Sequence[tuple[str, _Selects]],
) -> list[str]:
    """The problems only the whole scenario shows, one line each: node indexes that do not
    exist, faults that cannot apply (``endpoint`` None: it is invalid, skip its checks)."""
    found: list[str] = []

    def exist(where: str, nodes: Nodes) -> None:
        if isinstance(nodes, list):
            bad = sorted({i for i in nodes if not 0 <= i < count})
            if bad:
                which = f"node {bad[0]} does" if len(bad) == 1 else f"nodes {bad} do"
                found.append(f"{where}: {which} not exist; the scenario has nodes 0..{count - 1}")

    absent = {n for _, f in faults if isinstance(f, AbsentFault) for n in f.nodes}
    squatter: int | None = None
    for i, fault in faults:
        where = f"fault[{i}]"
        if hasattr(fault, "nodes"):
            exist(f"{where}.nodes", fault.nodes)
        on_node = getattr(fault, "on_node", None)
        if on_node is not None:
            exist(f"{where}.on_node", [on_node])
            if on_node in absent:
                found.append(
                    f"{where}.on_node: node {on_node} is absent ('absent' fault): "
                    "the trigger never fires"
                )
        if isinstance(fault, ToxicFault | LinkFault | StoreOpFault) and 0 in targets(
            count, fault.nodes
        ):
            found.append(
                f"{where}.nodes: got {shown(fault.nodes)}, which includes node 0; node 0 hosts "
                "the store and reaches it without a link: target other nodes (the default "
                "'others' does)"
            )
        if endpoint is not None:
            if isinstance(fault, ToxicFault | LinkFault) and not endpoint.via_proxy:
                found.append(
                    f"{where}: a {fault.kind} fault acts on a node's proxy link, but "
                    "endpoint.via_proxy is false; set it to true (the default)"
                )
            if isinstance(fault, DnsFault) and _is_ip_literal(endpoint.host):
                found.append(
                    f"{where}: a dns fault needs a host name, but endpoint.host "
                    f"{endpoint.host!r} is an IP address; give the endpoint a host name "
                    "(e.g. 'store.rdzv.test')"
                )
        if isinstance(fault, SquatterFault):
            if squatter is not None:
                found.append(
                    f"{where}: only one squatter can hold node 0's port (fault[{squatter}] "
                    "is one already)"
                )
            squatter = i
        if isinstance(fault, LateStartFault | ProcessFault) and absent & set(fault.nodes):
            never = sorted(absent & set(fault.nodes))
            found.append(
                f"{where}.nodes: got {shown(fault.nodes)}; node(s) {shown(never)} never "
                f"start: an 'absent' fault names them, so a {fault.kind} cannot reach them"
            )
    for i, override in overrides:
        exist(f"override[{i}].nodes", override.nodes)
    for where, node_expect in expects:
        exist(f"{where}.nodes", node_expect.nodes)
    return found
