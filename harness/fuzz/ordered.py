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

The rule names no fault kind: each fault's kind says what it may do
(:meth:`~harness.scenario.faults.base.Fault.effect`): which nodes it ends for good
(``kills``), which it restarts, which it holds still, and whose connections' close it may
hide from node 0. It applies to a scenario only where nothing else can take the dead
member's place:

* the target is not restarted by any fault (a restart inside the grace may take the claim
  over and complete the round legitimately; one after it races rdzv's grace timer);
* the later node is not restarted either (its recorded start is then its only one);
* no fault may hide the target's close (a held, slowed or filtered link -- a ``toxic``,
  ``link_down``, ``store_op``, or a packet rule -- can keep the store host from seeing the
  close until after the later node joined, and rdzv can only act on a close it has seen);
* node 0 is never held still (paused: a frozen store host reads the close and the later
  node's claim at once, in no order this rule can know);
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

from hypothesis import strategies as st

from harness.fuzz.oracle import effects
from harness.run.model import NodeOutcome, Violation
from harness.scenario.faults.draws import subset, tenths
from harness.scenario.faults.registry import FAULTS

__all__ = ["DEAD_MEMBER", "dead_members", "ordered_kill_schedules", "ordered_kills_fit"]

#: The check name of this rule's violations.
DEAD_MEMBER = "dead_member"
#: The kinds :func:`ordered_kill_schedules` draws (this rule is about them).
_SCHEDULED = ("absent", "late_start", "kill", "restart")


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
        KeyError: ``data`` lacks ``nodes``.
        pydantic.ValidationError: a fault table is not valid for its kind.
    """
    _, said = effects(data)
    if data.get("override") or any(0 in effect.holds for effect in said):
        return []
    restarted = {n for effect in said for n in effect.restarts}
    hidden = {n for effect in said for n in effect.hides_close}
    killed = {n for effect in said for n in effect.kills}
    by_node = {o.node: o for o in outcomes}
    found: list[Violation] = []
    for target in sorted(killed - restarted - hidden):
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


def ordered_kills_fit(capabilities: frozenset[str], allowed: frozenset[str] | None = None) -> bool:
    """Whether a world with ``capabilities`` can carry out :func:`ordered_kill_schedules`
    (and, when ``allowed`` names the kinds a fuzz session may draw, all of its kinds are
    among them)."""
    if allowed is not None and not allowed.issuperset(_SCHEDULED):
        return False
    kinds = [FAULTS.get(kind) for kind in _SCHEDULED]
    return all(kind is not None and kind.needs <= capabilities for kind in kinds)


@st.composite
def ordered_kill_schedules(
    draw: st.DrawFn, nodes: int, join_timeout: float
) -> list[dict[str, Any]]:
    """Fault schedules where a member dies before the round can complete.

    A worker is killed on its own ``joined`` event (``after`` 0-0.5 s), its claim written,
    while other workers start late or never: when the kill lands before a late worker
    starts, no rendezvous may return (``dead_member``, :mod:`harness.fuzz.ordered`). At
    most 3 faults: ``absent`` and one ``late_start`` or two ``late_start``, then the kill;
    one draw in four restarts the member instead (after 0.1-2.5 s), which may complete the
    round legitimately. Late delays are 1.5 s up to the join timeout, or 0.2-1.4 s; the long
    ones first, so shrinking keeps one where it can: in a fresh process (``harness replay``)
    the first nodes start slowly and a member may join only after a short delay passed.

    Raises:
        ValueError: (when drawing) ``nodes`` is below 3 (node 0 hosts the store).
    """
    if nodes < 3:
        raise ValueError(f"ordered_kill_schedules() needs at least 3 nodes, got {nodes}")
    target = draw(st.integers(1, nodes - 1))
    later = draw(subset([n for n in range(1, nodes) if n != target]))
    absent = [n for n in later if draw(st.booleans())] if draw(st.booleans()) else []
    faults: list[dict[str, Any]] = []
    if absent:
        faults.append({"kind": "absent", "nodes": absent})
    late = [n for n in later if n not in absent]
    split = len(late) > 1 and not absent and draw(st.booleans())
    long, short = tenths(min(1.5, join_timeout), join_timeout), tenths(0.2, 1.4)
    for group in (late[:1], late[1:]) if split else (late,):  # each group its own delay
        if group:
            delay = min(join_timeout, draw(long | short))
            faults.append({"kind": "late_start", "nodes": group, "delay": delay})
    death: dict[str, Any] = {
        "kind": "kill",
        "nodes": [target],
        "on": "joined",
        "on_node": target,
        "after": draw(tenths(0, 0.5)),
    }
    if draw(st.integers(0, 3)) == 3:  # now and then a restart: the round may complete
        death = {**death, "kind": "restart", "duration": draw(tenths(0.1, 2.5))}
    faults.append(death)
    return faults
