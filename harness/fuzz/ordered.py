"""The oracle's rule on the order a run recorded: no round completes with a dead member.

:mod:`harness.fuzz.oracle` derives what every node may report from the faults alone. For
most schedules with a kill that is an open list (``ok`` included): whether the round
completed before the kill or not depends on timing. One order settles it, and the run
records whether it happened: **a member killed before a node the round needs has started**.

Why that order decides: a static round completes only once every rank has claimed its
place, so it cannot complete before the node that started last has joined. If the target
was already dead (SIGKILL) when that node was launched, then at any possible completion
the target's claim either was never written (its rank is missing) or belongs to a
connection that has closed -- and rdzv never completes a round while one of its claims
belongs to a closed connection that no incarnation of the same node took over
(docs/rendezvous.md). So no other node's rendezvous may return.

The rule applies to a scenario only where nothing else can take the dead member's place:

* the target is not the target of any ``restart`` (a restart inside the grace may take the
  claim over and complete the round legitimately; one after it races rdzv's grace timer);
* the later node is not restarted either (its recorded start is then its only one);
* no network or store fault on the target's link (``toxic``, ``link_down``, ``store_op``):
  a held or slowed link can keep the store host from seeing the close until after the later
  node joined, and rdzv can only act on a close it has seen;
* node 0 is never paused (a frozen store host reads the close and the later node's claim
  at once, in no order this rule can know);
* no ``override`` (a node configured with another rank or world size changes who the round
  needs).

What remains assumed: a SIGKILLed process's connections close, and the store host reads
that, before a node the harness launches afterwards has started, connected and claimed.

Both times come from the runner's single thread and clock: the kill's time is when the
harness's SIGKILL returned (the killed node's ``finished``), the later node's is when the
harness began to launch it (its ``started``); a node never started (``absent``) counts as
starting after every kill. A kill with ``after`` past the target's ``joined`` event, or a
later node that starts before the kill lands, leaves the outcome open, as before: the round
may have completed first.

"Returned" is judged as the invariants judge it: the node's rendezvous handed it a rank,
even when the node failed afterwards (the harness's shared-store proof then waits for the
dead member's key and times out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.run.model import NodeOutcome, Violation

__all__ = ["DEAD_MEMBER", "dead_members"]

#: The check name of this rule's violations.
DEAD_MEMBER = "dead_member"


#: Faults on a node's link to the store: they can hide or delay its connection's close.
_ON_THE_LINK = ("toxic", "link_down", "store_op")


def _targets(data: Mapping[str, Any], *kinds: str) -> set[int]:
    count = int(data["nodes"])
    found: set[int] = set()
    for fault in data.get("fault", []):
        if fault["kind"] not in kinds:
            continue
        nodes = fault.get("nodes", "others")
        if nodes == "all":
            found.update(range(count))
        elif nodes == "others":
            found.update(range(1, count))
        else:
            found.update(nodes)
    return found


def _started_after(node: NodeOutcome, t: float) -> bool:
    """Whether ``node`` was launched after ``t`` (never launched: yes)."""
    if node.status == "absent" or node.started is None:
        return True
    return node.started > t


def _ranks(nodes: Sequence[int]) -> str:
    return ", ".join(map(str, nodes))


def dead_members(data: Mapping[str, Any], outcomes: Sequence[NodeOutcome]) -> list[Violation]:
    """The ``dead_member`` violations of one run of scenario ``data``.

    Args:
        data: the scenario as a plain dict (the TOML form): ``nodes``, ``fault``,
            optionally ``override``.
        outcomes: what each node reported (:attr:`harness.run.model.Report.outcomes`).

    Returns:
        One violation per killed member whose death the run shows came before a needed
        node started, naming the nodes whose rendezvous returned all the same; empty when
        the rule does not apply or holds.

    Raises:
        KeyError: ``data`` lacks ``nodes``, or a fault lacks ``kind``.
    """
    if data.get("override") or 0 in _targets(data, "pause"):
        return []
    restarted = _targets(data, "restart")
    hidden = _targets(data, *_ON_THE_LINK)
    by_node = {o.node: o for o in outcomes}
    found: list[Violation] = []
    for target in sorted(_targets(data, "kill") - restarted - hidden):
        dead = by_node.get(target)
        if dead is None or dead.status != "killed" or dead.finished is None:
            continue  # the kill never landed (the node had already ended)
        killed_at = dead.finished
        later = [
            o
            for o in outcomes
            if o.node != target and o.node not in restarted and _started_after(o, killed_at)
        ]
        returned = [o.node for o in outcomes if o.rank is not None and o.node != target]
        if not later or not returned:
            continue
        first = later[0]
        order = (
            f"and node {first.node} was never started"
            if first.started is None
            else f"before node {first.node} started at {first.started:.2f} s"
        )
        found.append(
            Violation(
                DEAD_MEMBER,
                f"the rendezvous returned on node(s) {_ranks(returned)} in a round whose "
                f"member {target} was dead: node {target} was killed at {killed_at:.2f} s "
                f"{order}, so the round completed without rank "
                f"{target}'s claim being alive (nothing restarted node {target}); a round "
                "must fail naming the lost rank instead",
                tuple(returned),
            )
        )
    return found
