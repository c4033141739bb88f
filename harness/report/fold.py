"""Fold per-node lines of large runs: nodes that say the same thing become one line (pure).

At 4096 nodes a failing run has thousands of look-alike violations and outcomes
("node 17 ended 'timeout', expected 'ok': ..."). Each is folded with the others that read
the same once the node's own number is masked (``node 17`` and ``rank 17`` become
``node N`` and ``rank N``), and the group is shown once, with its nodes as ranges:
``[outcome] node N ended 'timeout', expected 'ok': ...  (nodes 0-2729, 2731-4095: 4095)``.
A group of one node keeps its own words.

* :func:`violation_folds`, :func:`outcome_folds` — the groups, in order of first node;
* :func:`fold_lines` — at most ``limit`` of them as lines, then one line for the rest;
* :func:`placement_line` — how the world ran the nodes (``nodes 1-4095: packed 512 per
  process``), when it says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from harness.report.timeline import node_ranges
from harness.run.model import NodeOutcome, Violation

__all__ = [
    "FOLD_ABOVE",
    "Fold",
    "fold_lines",
    "mask",
    "nodes_label",
    "outcome_folds",
    "placement_line",
    "short_ranges",
    "violation_folds",
]


#: Runs of more than this many nodes fold their per-node lines in JUnit and in the HTML
#: report's table (the console's failure panel always folds).
FOLD_ABOVE = 64


def mask(text: str, node: int, rank: int | None = None) -> str:
    """``text`` with ``node <node>`` and ``rank <rank>`` (a node's own number) written
    ``node N`` and ``rank N``, so that look-alike lines of different nodes compare equal."""
    numbers = {node} if rank is None else {node, rank}
    for number in numbers:
        text = re.sub(rf"\b(node|rank) {number}(?!\.?\d)", r"\1 N", text)
    return text


def short_ranges(nodes: Iterable[int], runs: int = 8) -> str:
    """:func:`~harness.report.timeline.node_ranges` of at most ``runs`` runs: ``0-2729,
    2731-4095``, or ``0, 2, 4, 6, 8, 10, 12, …, 4094`` (the first runs, then the last)."""
    parts = node_ranges(nodes).split(", ")
    if len(parts) <= runs:
        return ", ".join(parts)
    return ", ".join([*parts[: runs - 1], "…", parts[-1]])


def nodes_label(nodes: Sequence[int]) -> str:
    """``node 3``, ``nodes 1-4`` or ``nodes 0-2729, 2731-4095 (4095)`` (a count when the
    ranges have gaps; at most 8 runs, see :func:`short_ranges`)."""
    if len(nodes) == 1:
        return f"node {nodes[0]}"
    contiguous = max(nodes) - min(nodes) + 1 == len(set(nodes))
    ranges = short_ranges(nodes)
    return f"nodes {ranges}" if contiguous else f"nodes {ranges} ({len(nodes)})"


@dataclass
class Fold:
    """Nodes whose lines read the same: ``line`` (node number masked) and the first node's
    own ``sample``; :attr:`text` is what is shown."""

    nodes: list[int]
    line: str
    sample: str

    @property
    def text(self) -> str:
        return self.sample if len(self.nodes) == 1 else self.line


def _fold(items: Iterable[tuple[Hashable, Sequence[int], str, str]]) -> list[Fold]:
    """Group ``(key, nodes, masked line, own line)`` by key, in order of first appearance."""
    groups: dict[Hashable, Fold] = {}
    for key, nodes, line, sample in items:
        if key in groups:
            groups[key].nodes.extend(nodes)
        else:
            groups[key] = Fold(list(nodes), line, sample)
    return list(groups.values())


def violation_folds(violations: Sequence[Violation]) -> list[Fold]:
    """Violations of one node that read the same but for that node's number, folded;
    ``line``/``sample`` are ``[check] message``. A violation naming several nodes (or none)
    stays alone."""

    def item(i: int, v: Violation) -> tuple[Hashable, Sequence[int], str, str]:
        own = f"[{v.check}] {v.message}"
        if len(v.nodes) != 1:
            return (i,), v.nodes, own, own
        masked = f"[{v.check}] {mask(v.message, v.nodes[0])}"
        return (v.check, masked, v.known), v.nodes, masked, own

    return _fold(item(i, v) for i, v in enumerate(violations))


def _outcome_words(o: NodeOutcome, rank: str, elapsed: str) -> str:
    parts = [o.status]
    if rank:
        parts.append(rank)
    if o.world_size is not None:
        parts.append(f"world size {o.world_size}")
    if elapsed:
        parts.append(elapsed)
    return ", ".join(parts)


def outcome_folds(outcomes: Sequence[NodeOutcome], own: Callable[[NodeOutcome], str]) -> list[Fold]:
    """Nodes that ended alike (status, error, message but for their own number, world size,
    rank = node id or none): ``line`` reads ``ok, rank = node, world size 4096, after
    6.17-6.61 s``; ``sample`` is ``own(first node)``."""
    keyed: dict[Hashable, list[NodeOutcome]] = {}
    for o in sorted(outcomes, key=lambda o: o.node):
        rank: object = None if o.rank is None else "same" if o.rank == o.node else o.rank
        message = mask(o.message, o.node, o.rank) if o.message else ""
        keyed.setdefault((o.status, o.error_class, message, o.world_size, rank), []).append(o)
    folds = []
    for (_, error_class, message, _, rank), group in keyed.items():
        first = group[0]
        times = [o.elapsed for o in group if o.elapsed is not None]
        elapsed = ""
        if times:
            low, high = min(times), max(times)
            same = high - low < 0.0005
            elapsed = f"after {low:.3f} s" if same else f"after {low:.2f}-{high:.2f} s"
        shown_rank = "" if rank is None else "rank = node" if rank == "same" else f"rank {rank}"
        line = _outcome_words(first, shown_rank, elapsed)
        if message:
            line += f" \N{EM DASH} {error_class or 'message'}: {message}"
        folds.append(Fold([o.node for o in group], line, own(first)))
    return folds


def fold_lines(
    folds: Sequence[Fold], limit: int | None = None, fmt: Callable[[Fold], str] | None = None
) -> list[str]:
    """One line per fold (``fmt``, by default ``nodes ...: text``), at most ``limit`` of
    them, then ``... and K more (M nodes)``."""

    def default(fold: Fold) -> str:
        return fold.text if len(fold.nodes) == 1 else f"{nodes_label(fold.nodes)}: {fold.line}"

    shown = folds if limit is None else folds[:limit]
    lines = [(fmt or default)(f) for f in shown]
    rest = folds[len(shown) :]
    if rest:
        count = sum(len(f.nodes) for f in rest)
        lines.append(f"... and {len(rest)} more ({count} node{'s' if count != 1 else ''})")
    return lines


def placement_line(outcomes: Sequence[NodeOutcome], limit: int = 6) -> str | None:
    """``nodes 0: process; nodes 1-4095: packed 512 per process`` — how the world ran the
    nodes, grouped by the world's words (None when it says nothing of any node)."""
    if all(o.placement is None for o in outcomes):
        return None
    groups: dict[str, list[int]] = {}
    for o in sorted(outcomes, key=lambda o: o.node):
        groups.setdefault(o.placement or "not said", []).append(o.node)
    parts = [f"{nodes_label(nodes)}: {text}" for text, nodes in list(groups.items())[:limit]]
    if len(groups) > limit:
        rest = sum(len(nodes) for nodes in list(groups.values())[limit:])
        parts.append(f"{len(groups) - limit} more placements on {rest} nodes")
    return "; ".join(parts)
