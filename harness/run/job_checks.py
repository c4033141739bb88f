"""Judge a job scenario's parts: the workers' ranks, world size and collective, then the
scenario's ``[[expect.parts]]``.

Always checked, on the parts of every node (a scenario with ``[job]``):

1. ``job_ranks``: the workers that reached ``init_process_group`` hold distinct RANKs;
   when every worker ended ``ok`` they are exactly 0..W-1 (W = nodes x nproc_per_node).
2. ``job_world_size``: every such worker was handed WORLD_SIZE W.
3. ``collective``: with the default worker, every all-reduce of ``rank + 1`` gave
   W(W+1)/2 (a user's script is judged by its expectations only).

Then ``[[expect.parts]]`` (the backend's own ``[backends.<name>] expect`` when it records
one): each named part's outcome (or any of a list), message pattern, exit code and the
agent's restarts. A node expected ``ok`` whose workers no entry names expects them ``ok``.
A part the scenario names that the node never reported is a ``part`` violation.

The invariants above may be listed in ``[backends.<name>] violates`` like the node's:
:func:`harness.run.checks.check` marks them ``known``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from harness.run.model import Violation
from harness.scenario.format import Nodes
from harness.scenario.model import Scenario, allowed_outcomes

__all__ = ["PartView", "job_invariants", "part_expectations"]


class PartView(Protocol):
    """What the checks read of one part of a job node."""

    @property
    def node(self) -> int: ...
    @property
    def part(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def exitcode(self) -> int | None: ...
    @property
    def rank(self) -> int | None: ...
    @property
    def world_size(self) -> int | None: ...
    @property
    def result(self) -> float | None: ...
    @property
    def restarts(self) -> int | None: ...
    @property
    def message(self) -> str | None: ...


def _is_worker(p: PartView) -> bool:
    return p.part.startswith("worker ")


def _invariants(sc: Scenario, parts: Sequence[PartView]) -> list[Violation]:
    assert sc.job is not None
    size = sc.nodes * sc.job.nproc_per_node
    workers = [p for p in parts if _is_worker(p)]
    ranked = [p for p in workers if p.rank is not None]
    found: list[Violation] = []
    for rank, count in Counter(p.rank for p in ranked).items():
        if count > 1:
            nodes = tuple(sorted({p.node for p in ranked if p.rank == rank}))
            found.append(Violation("job_ranks", f"RANK {rank} was given to {count} workers", nodes))
    every_ok = len(workers) == size and all(p.status == "ok" for p in workers)
    ranks = sorted(p.rank for p in ranked if p.rank is not None)
    if every_ok and ranks != list(range(size)):
        found.append(Violation("job_ranks", f"the workers' RANKs are {ranks}, not 0..{size - 1}"))
    for p in ranked:
        if p.world_size != size:
            found.append(
                Violation(
                    "job_world_size",
                    f"node {p.node} {p.part} got WORLD_SIZE {p.world_size}, the job has {size} "
                    f"workers ({sc.nodes} nodes x {sc.job.nproc_per_node})",
                    (p.node,),
                )
            )
    if sc.job.script is None:
        want = size * (size + 1) / 2
        for p in workers:
            if p.result is not None and p.result != want:
                found.append(
                    Violation(
                        "collective",
                        f"node {p.node} {p.part}'s all-reduce gave {p.result:g}, expected "
                        f"{want:g} (the sum of rank + 1 over {size} workers)",
                        (p.node,),
                    )
                )
    return found


def _judge(
    p: PartView, outcomes: tuple[str, ...] | None, message: str | None, who: str = ""
) -> list[Violation]:
    where = f"{who or f'node {p.node}'} {p.part}"
    if outcomes is not None and p.status not in outcomes:
        shown = repr(outcomes[0]) if len(outcomes) == 1 else f"one of {list(outcomes)}"
        said = f": {p.message}" if p.message else ""
        return [
            Violation(
                "part_outcome", f"{where} ended {p.status!r}, expected {shown}{said}", (p.node,)
            )
        ]
    if message is not None and not re.search(message, p.message or ""):
        return [
            Violation(
                "part_message",
                f"{where}'s message does not match /{message}/: {p.message!r}",
                (p.node,),
            )
        ]
    return []


def _agent_ranks(parts: Sequence[PartView]) -> dict[int, int]:
    """Each node's rank as its agent was given it (nodes whose agent got none are left out)."""
    return {p.node: p.rank for p in parts if p.part == "agent" and p.rank is not None}


def _selected(sc: Scenario, selector: Nodes, ranks: dict[int, int]) -> list[tuple[int, str]]:
    """The nodes an entry names, each with how a violation names it; with ``[expect]
    by_rank`` the selector's numbers are ranks, and a rank no node was given is named
    with node -1 (it reported nothing)."""
    chosen = sc.targets(selector)
    if not (sc.variant.expect or sc.expect).by_rank:
        return [(node, f"node {node}") for node in chosen]
    holders = {rank: node for node, rank in ranks.items()}
    return [
        (holders[rank], f"node {holders[rank]} (rank {rank})")
        if rank in holders
        else (-1, f"rank {rank} (no node was given it)")
        for rank in chosen
    ]


def _expectations(sc: Scenario, parts: Sequence[PartView]) -> list[Violation]:
    expect = sc.variant.expect or sc.expect
    found: list[Violation] = []
    named: set[tuple[int, str]] = set()
    ranks = _agent_ranks(parts)
    for entry in expect.parts:
        for node, who in _selected(sc, entry.nodes, ranks):
            mine = [p for p in parts if p.node == node and entry.names(p.part)]
            if not mine:
                seen = (node,) if node >= 0 else ()
                found.append(Violation("part", f"{who} reported no part {entry.part!r}", seen))
            for p in mine:
                named.add((p.node, p.part))
                found += _judge(p, entry.outcomes, entry.message, who)
                if entry.exitcode is not None and p.exitcode != entry.exitcode:
                    found.append(
                        Violation(
                            "part_exitcode",
                            f"{who} {p.part} exited {p.exitcode}, expected {entry.exitcode}",
                            (node,),
                        )
                    )
                allowed = entry.allowed_restarts
                if allowed is not None and p.restarts not in allowed:
                    expected = " or ".join(str(n) for n in allowed)
                    found.append(
                        Violation(
                            "restarts",
                            f"{who} {p.part} restarted {p.restarts} time(s), expected {expected}",
                            (node,),
                        )
                    )
    for p in parts:
        expects_ok = allowed_outcomes(sc.expected(p.node, ranks.get(p.node)).outcome) == ("ok",)
        if _is_worker(p) and (p.node, p.part) not in named and expects_ok:
            found += _judge(p, ("ok",), None)
    return found


def job_invariants(sc: Scenario, parts: Sequence[PartView]) -> list[Violation]:
    """Every violation of the job invariants (none when the scenario has no ``[job]``)."""
    return _invariants(sc, parts) if sc.job is not None else []


def part_expectations(sc: Scenario, parts: Sequence[PartView]) -> list[Violation]:
    """Every violation of ``[[expect.parts]]`` (none when the scenario has no ``[job]``)."""
    return _expectations(sc, parts) if sc.job is not None else []
