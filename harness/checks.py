"""Judge a run: invariants that always hold, then the scenario's own expectations.

Always checked:

1. ``ranks``: successful nodes hold distinct ranks, each the rank the node was configured
   with (static rendezvous: ranks mirror node ranks); when every node succeeds the ranks
   are exactly 0..N-1.
2. ``world_size``: every successful node reports the same world size, the scenario's.
3. ``complete_round``: no node succeeds in a round that some rank never joined.
4. ``shared_store``: every successful node saw every rank's key in the shared store.
5. ``hung``: no node outlived the hard deadline (unless the scenario expects it).
6. ``leaks``: after the run no node process is left running, no port is left listening,
   and teardown met no problem.

Then per node: the expected outcome, message pattern and elapsed-time bounds.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import psutil

from harness.model import NodeOutcome, Violation
from harness.scenario import Scenario

__all__ = ["check", "listening"]


def listening(ports: Sequence[int]) -> list[int]:
    """Which of ``ports`` something on this machine still listens on (TCP)."""
    wanted = set(ports)
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # pragma: no cover - not root and not Linux
        return []
    found = set()
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr[1] in wanted:
            found.add(int(conn.laddr[1]))
    return sorted(found)


def _configured_rank(sc: Scenario, node: int) -> int:
    rank = node
    for override in sc.override:
        if node in override.nodes and override.rank is not None:
            rank = override.rank
    return rank


def _invariants(sc: Scenario, outcomes: Sequence[NodeOutcome]) -> list[Violation]:
    found: list[Violation] = []
    ok = [o for o in outcomes if o.status == "ok"]
    ranks = Counter(o.rank for o in ok if o.rank is not None)
    for rank, count in ranks.items():
        if count > 1:
            nodes = tuple(o.node for o in ok if o.rank == rank)
            found.append(Violation("ranks", f"rank {rank} was given to {count} nodes", nodes))
    for o in ok:
        if o.rank != _configured_rank(sc, o.node):
            found.append(
                Violation(
                    "ranks",
                    f"node {o.node} got rank {o.rank}, expected {_configured_rank(sc, o.node)}",
                    (o.node,),
                )
            )
    if len(ok) == sc.nodes and sorted(ranks) != list(range(sc.nodes)):
        found.append(Violation("ranks", f"ranks are {sorted(ranks)}, not 0..{sc.nodes - 1}"))
    sizes = {o.world_size for o in ok}
    if len(sizes) > 1 or (sizes and sizes != {sc.nodes}):
        found.append(
            Violation(
                "world_size",
                f"successful nodes report world sizes {sorted(map(str, sizes))}, "
                f"the scenario has {sc.nodes} nodes",
                tuple(o.node for o in ok),
            )
        )
    if ok:
        joined = {o.rank for o in ok} | {
            e.fields.get("rank") for o in outcomes for e in o.events if e.event == "joined"
        }
        missing = [r for r in range(sc.nodes) if r not in joined]
        if missing:
            found.append(
                Violation(
                    "complete_round",
                    f"{len(ok)} node(s) succeeded although rank(s) {missing} never joined",
                    tuple(o.node for o in ok),
                )
            )
    for o in ok:
        if o.shared_store_ok is False:
            found.append(
                Violation("shared_store", f"node {o.node} did not see every rank's key", (o.node,))
            )
    for o in outcomes:
        if o.status == "hung" and sc.expected(o.node).outcome != "hung":
            found.append(
                Violation(
                    "hung", f"node {o.node} outlived the hard deadline: {o.message}", (o.node,)
                )
            )
    return found


def _expectations(sc: Scenario, outcomes: Sequence[NodeOutcome]) -> list[Violation]:
    found: list[Violation] = []
    for o in outcomes:
        want = sc.expected(o.node)
        if o.status != want.outcome:
            detail = f": {o.error_class}: {o.message}" if o.message else ""
            found.append(
                Violation(
                    "outcome",
                    f"node {o.node} ended {o.status!r}, expected {want.outcome!r}{detail}",
                    (o.node,),
                )
            )
            continue
        if want.message is not None and not re.search(want.message, o.message or ""):
            found.append(
                Violation(
                    "message",
                    f"node {o.node}'s message does not match /{want.message}/: {o.message!r}",
                    (o.node,),
                )
            )
        if want.elapsed is not None:
            low, high = want.elapsed
            elapsed = o.elapsed
            if elapsed is None or not low <= elapsed <= high:
                shown = "unknown" if elapsed is None else f"{elapsed:.2f}s"
                found.append(
                    Violation(
                        "elapsed",
                        f"node {o.node} took {shown}, expected within [{low}, {high}] s",
                        (o.node,),
                    )
                )
    return found


def check(
    sc: Scenario,
    outcomes: Sequence[NodeOutcome],
    *,
    leftover_pids: Sequence[int] = (),
    ports: Sequence[int] = (),
    teardown_problems: Sequence[str] = (),
) -> list[Violation]:
    """Every violation of the invariants and of the scenario's expectations."""
    found = _invariants(sc, outcomes) + _expectations(sc, outcomes)
    if leftover_pids:
        found.append(
            Violation("leaks", f"node processes still running at the end: {list(leftover_pids)}")
        )
    still = listening(ports)
    if still:
        found.append(Violation("leaks", f"ports still listening after teardown: {still}"))
    found.extend(Violation("leaks", problem) for problem in teardown_problems)
    return found
