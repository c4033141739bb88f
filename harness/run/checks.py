"""Judge a run: invariants that always hold, then the scenario's own expectations.

Always checked:

1. ``ranks``: nodes whose rendezvous returned hold distinct ranks, each the rank the node
   was configured with (static rendezvous: ranks mirror node ranks) unless the backend
   ranks the nodes itself (its :func:`~harness.world.process.backends.traits`: torch's c10d); when
   every node succeeds the ranks are exactly 0..N-1.
2. ``world_size``: every node whose rendezvous returned was handed the scenario's world size.
3. ``complete_round``: no rendezvous returns in a round that some rank never joined.
4. ``shared_store``: every successful node saw every rank's key in the shared store.
5. ``hung``: no node outlived the hard deadline (unless the scenario expects it).
6. ``leaks``: the world left nothing behind (no node process still running, no port
   still listening) and its teardown met no problem; the world says what (its own words).
7. ``idle``: no fault the scenario expects not to act (``[expect] idle_faults``) acted.

A job scenario's parts (agent, workers) are judged by :mod:`harness.run.job_checks`:
the workers' RANKs, WORLD_SIZE and collective result, then ``[[expect.parts]]``.

Then per node: the expected outcome (or any of a list), message pattern and elapsed-time
bounds — the backend's own ``[backends.<name>] expect`` when the scenario records one.

An invariant listed in ``[backends.<name>] violates`` is that backend's known behaviour: its
violations come back marked ``known`` (shown, not failing), and a run that does *not* break
it fails the ``known_break`` check, so the record cannot silently go stale.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from harness.run.job_checks import PartView, job_invariants, part_expectations
from harness.run.model import NodeOutcome, Violation
from harness.scenario.faults.record import FaultRecord
from harness.scenario.model import Scenario, allowed_outcomes
from harness.world.process.backends import traits

__all__ = ["check"]


def _configured_rank(sc: Scenario, node: int) -> int:
    rank = node
    for override in sc.override:
        if node in override.nodes and override.rank is not None:
            rank = override.rank
    return rank


#: Events that say a rank joined: rdzv's ``joined``, a job agent's ``rendezvous_done``.
_JOINS = frozenset({"joined", "rendezvous_done"})


def _joined_ranks(outcomes: Sequence[NodeOutcome]) -> set[int]:
    """Ranks that took part in the round: every rank whose rendezvous returned, those the
    backend reported as joined (rdzv's ``joined`` events, a job agent's ``rendezvous_done``:
    its group rank) and those whose key some node
    found in the shared store (what shows a backend without join events, like torch's)."""
    joined = {o.rank for o in outcomes if o.rank is not None}
    joined |= {r for o in outcomes for r in o.seen_ranks or ()}
    # Rank 0's word, once per distinct word: 10,240 ranks repeat the same one.
    words = {
        (o.world_size, tuple(o.seen_all_but))
        for o in outcomes
        if o.seen_all_but is not None and o.world_size is not None
    }
    for size, all_but in words:
        joined |= set(range(size)).difference(all_but)
    reported = {e.fields.get("rank") for o in outcomes for e in o.events if e.event in _JOINS}
    return joined | {r for r in reported if isinstance(r, int)}


def _invariants(sc: Scenario, outcomes: Sequence[NodeOutcome]) -> list[Violation]:
    found: list[Violation] = []
    # Judged on what the rendezvous returned, even where the node failed afterwards.
    returned = [o for o in outcomes if o.rank is not None]
    ok = [o for o in outcomes if o.status == "ok"]
    ranks = Counter(o.rank for o in returned if o.rank is not None)
    for rank, count in ranks.items():
        if count > 1:
            nodes = tuple(o.node for o in returned if o.rank == rank)
            found.append(Violation("ranks", f"rank {rank} was given to {count} nodes", nodes))
    mirrored = returned if traits(sc.backend).ranks_mirror_nodes else []
    for o in mirrored:
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
    sizes = {o.world_size for o in returned}
    if len(sizes) > 1 or (sizes and sizes != {sc.nodes}):
        found.append(
            Violation(
                "world_size",
                f"nodes were handed world sizes {sorted(map(str, sizes))}, "
                f"the scenario has {sc.nodes} nodes",
                tuple(o.node for o in returned),
            )
        )
    if returned:
        joined = _joined_ranks(outcomes)
        missing = [r for r in range(sc.nodes) if r not in joined]
        if missing:
            found.append(
                Violation(
                    "complete_round",
                    f"the rendezvous returned on {len(returned)} node(s) although rank(s) "
                    f"{missing} never joined (no join reported, no key in the shared store)",
                    tuple(o.node for o in returned),
                )
            )
    seen_by_0 = next((set(o.seen_ranks) for o in returned if o.rank == 0 and o.seen_ranks), None)
    for o in ok:
        if o.shared_store_ok is False:
            found.append(
                Violation("shared_store", f"node {o.node} did not see every rank's key", (o.node,))
            )
        elif seen_by_0 is not None and o.rank is not None and o.rank not in seen_by_0:
            found.append(
                Violation(
                    "shared_store",
                    f"node {o.node} succeeded as rank {o.rank}, but rank 0 never saw its key:"
                    " their stores are not one store",
                    (o.node,),
                )
            )
    for o in outcomes:
        want = sc.expected(o.node, o.rank)
        if o.status == "hung" and "hung" not in allowed_outcomes(want.outcome):
            found.append(
                Violation(
                    "hung", f"node {o.node} outlived the hard deadline: {o.message}", (o.node,)
                )
            )
    return found


def _known_breaks(sc: Scenario, found: list[Violation]) -> list[Violation]:
    recorded = set(sc.variant.violates)
    if not recorded:
        return found
    note = f" ({sc.variant.note})" if sc.variant.note else ""
    marked = [
        Violation(v.check, f"{v.message} [known {sc.backend} behaviour]", v.nodes, known=True)
        if v.check in recorded
        else v
        for v in found
    ]
    for name in sorted(recorded - {v.check for v in found}):
        marked.append(
            Violation(
                "known_break",
                f"{sc.backend} is recorded as breaking '{name}' here{note}, but this run did "
                "not; update [backends] in the scenario file",
            )
        )
    return marked


def _expectations(sc: Scenario, outcomes: Sequence[NodeOutcome]) -> list[Violation]:
    found: list[Violation] = []
    by_rank = (sc.variant.expect or sc.expect).by_rank
    for o in outcomes:
        want = sc.expected(o.node, o.rank)
        who = f"node {o.node}" + (f" (rank {o.rank})" if by_rank and o.rank is not None else "")
        allowed = allowed_outcomes(want.outcome)
        if o.status not in allowed:
            said = f"{o.error_class}: {o.message}" if o.error_class else o.message
            detail = f": {said}" if o.message else ""
            shown = repr(allowed[0]) if len(allowed) == 1 else f"one of {list(allowed)}"
            found.append(
                Violation(
                    "outcome",
                    f"{who} ended {o.status!r}, expected {shown}{detail}",
                    (o.node,),
                )
            )
            continue
        if want.message is not None and not re.search(want.message, o.message or ""):
            found.append(
                Violation(
                    "message",
                    f"{who}'s message does not match /{want.message}/: {o.message!r}",
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
                        f"{who} took {shown}, expected within [{low}, {high}] s",
                        (o.node,),
                    )
                )
    return found


def check(
    sc: Scenario,
    outcomes: Sequence[NodeOutcome],
    *,
    leaks: Sequence[str] = (),
    faults: Sequence[FaultRecord] = (),
    parts: Sequence[PartView] = (),
) -> list[Violation]:
    """Every violation of the invariants and of the scenario's expectations (breaks the
    backend is recorded as making come back ``known``), one ``idle`` violation per fault of
    ``faults`` that acted although its record says it was expected not to
    (``expected_idle``, from ``[expect] idle_faults``), then one ``leaks`` violation per line of
    ``leaks`` (what the world's teardown reported left behind). A job scenario's ``parts``
    (every part of every node) are judged too (:mod:`harness.run.job_checks`)."""
    invariants = _invariants(sc, outcomes) + job_invariants(sc, parts)
    found = _known_breaks(sc, invariants) + _expectations(sc, outcomes)
    found += part_expectations(sc, parts)
    for fault in faults:
        if fault.expected_idle and fault.acted and any(fault.acted.values()):
            found.append(
                Violation(
                    "idle",
                    f"fault {fault.index} ({fault.kind}) acted: {fault.effects}; the "
                    "scenario expects it not to act (expect.idle_faults)",
                    tuple(fault.nodes),
                )
            )
    found.extend(Violation("leaks", leak) for leak in leaks)
    return found
