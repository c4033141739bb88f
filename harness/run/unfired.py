"""The records of faults that never fired: their time, or their node's event, did not come
before the run ended (or was interrupted).

A fault makes its record when it acts (:meth:`~harness.scenario.faults.base.Fault.inject`),
so one whose trigger never came made none, and the reports would not mention it at all: a
``kill`` at 30 s in a run that ended at 6 s, a fault on a node's ``joined`` when that node
never joined. :func:`unfired_records` makes their records (``fired`` false), saying when
each was due and why it did not act; the reports then flag them as faults that did not act
(or, when the run was interrupted, as not reached).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.scenario.faults.base import Event, Fault
from harness.scenario.faults.record import FaultRecord
from harness.scenario.model import Scenario

__all__ = ["unfired_records"]


def unfired_records(
    scenario: Scenario,
    faults: Sequence[tuple[int, Fault]],
    made: Sequence[FaultRecord],
    events: Callable[[int], Sequence[Event]],
    end: float,
) -> list[FaultRecord]:
    """A record for each of ``faults`` (index, fault) that made none in ``made``: it never
    fired in a run that ended ``end`` seconds after its start; ``events(node)`` is what
    the node reported."""
    fired = {record.index for record in made}
    return [
        _unfired(scenario, index, fault, events, end)
        for index, fault in faults
        if index not in fired
    ]


def _unfired(
    scenario: Scenario,
    index: int,
    fault: Fault,
    events: Callable[[int], Sequence[Event]],
    end: float,
) -> FaultRecord:
    nodes = getattr(fault, "nodes", None)  # every built-in kind that targets nodes has it
    try:
        targets = scenario.targets(nodes) if nodes is not None else []
    except TypeError:  # a registered kind whose 'nodes' is not a node selector
        targets = []
    trigger = fault.when()
    why = f"never fired: every node had ended by {end:.2f} s"
    if trigger is None:
        due = "at start-up"
    elif trigger.on is None:
        due = f"at {trigger.at:.2f} s"
    else:
        node, name = trigger.on_node, trigger.on
        due = f"on node {node}'s '{name}'"
        if trigger.after:
            due = f"{trigger.after:g} s after node {node}'s '{name}'"
        if node is not None and not any(e.event == name for e in events(node)):
            why = f"never fired: node {node} never reported '{name}'"
    return FaultRecord(index, fault.kind, targets, end, end, due, acted={}, note=why, fired=False)
