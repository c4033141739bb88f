"""What each node said, as the report keeps it.

The runner gathers a node's typed messages (:mod:`harness.world.messages`) into its
:class:`~harness.run.context.NodeState` during the run; at the end :func:`node_outcome` turns
that state, with the node's last :class:`~harness.world.messages.Outcome`, into the
report's :class:`~harness.run.model.NodeOutcome` (read by name, field for field), and
:func:`part_outcome` turns a job part's outcome (an agent's, a worker's) into a
:class:`~harness.run.model.PartOutcome` as it comes.
"""

from __future__ import annotations

from harness.run.context import NodeState
from harness.run.model import NodeOutcome, PartOutcome
from harness.world.messages import Outcome

__all__ = ["node_outcome", "part_outcome"]


def node_outcome(
    node: int, state: NodeState, *, stopped: bool, output: str | None, t0: float
) -> NodeOutcome:
    """Node ``node``'s outcome from its ``state`` at the end of the run: ``interrupted``
    (the run was ``stopped``) or ``hung`` when it said none; ``output`` is what it printed,
    ``t0`` the release on the harness's monotonic clock (its start is counted from it)."""
    status = state.status or ("interrupted" if stopped else "hung")
    said = state.outcome or Outcome(node, 0.0, status)  # it said nothing
    return NodeOutcome(
        node=node,
        status=status,
        rank=said.rank,
        world_size=said.world_size,
        run_id=said.run_id,
        error_class=said.error_class,
        message=said.message,
        started=state.started,
        finished=state.finished,
        pid=said.pid,
        events=state.events,
        shared_store_ok=said.shared_store_ok,
        seen_ranks=said.seen_ranks,
        seen_all_but=said.seen_all_but,
        output=output,
        maxrss_kib=said.maxrss_kib,
        placement=said.placement or state.placement,  # said none: from its last Started
        began=state.began if said.started is None else said.started - t0,
        shutdown_error=said.shutdown_error,
        parts=list(state.parts),
    )


def part_outcome(said: Outcome, t: float) -> PartOutcome:
    """A job part's outcome as the report keeps it (``t``: seconds since the release)."""
    return PartOutcome(
        node=said.node,
        part=said.part,
        status=said.status,
        finished=t,
        exitcode=said.exitcode,
        rank=said.rank,
        world_size=said.world_size,
        result=said.result,
        restarts=said.restarts,
        membership_restarts=said.membership_restarts,
        error_class=said.error_class,
        message=said.message,
    )
