"""The checks of a scenario that need the whole file: node indexes that must exist and
faults that cannot apply where they are aimed.

:func:`consistency` returns every problem it finds, one line each in the key-path style of
:mod:`harness.scenario.explain`. :class:`harness.scenario.model.Scenario` runs it on a valid
file; on an invalid one, :func:`harness.scenario.load.parse` runs it on the parts that are
valid on their own, so a file's problems are all reported at once. What a fault kind needs
of the rest of the file, the kind checks itself (:meth:`~harness.scenario.faults.base.Fault.check`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from harness.scenario.faults.base import EndpointView, Fault, Whole
from harness.scenario.format import Nodes

__all__ = ["consistency"]


class _Selects(Protocol):
    """An ``[[override]]`` or ``[[expect.nodes]]`` entry: it names nodes."""

    @property
    def nodes(self) -> Nodes: ...


def consistency(
    count: int,
    endpoint: EndpointView | None,
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

    absent = frozenset(n for _, f in faults for n in f.never_starts())
    whole = Whole(count, endpoint, faults, absent)
    for i, fault in faults:
        where = f"fault[{i}]"
        nodes: Nodes | None = getattr(fault, "nodes", None)
        if nodes is not None:
            exist(f"{where}.nodes", nodes)
        trigger = fault.when()
        on_node = trigger.on_node if trigger is not None else None
        if on_node is not None:
            exist(f"{where}.on_node", [on_node])
            if on_node in absent:
                found.append(
                    f"{where}.on_node: node {on_node} is absent ('absent' fault): "
                    "the trigger never fires"
                )
        found.extend(fault.check(i, whole))
    for i, override in overrides:
        exist(f"override[{i}].nodes", override.nodes)
    for where, node_expect in expects:
        exist(f"{where}.nodes", node_expect.nodes)
    return found
