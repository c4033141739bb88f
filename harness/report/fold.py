"""Fold per-node lines of large runs: nodes that say the same thing become one line (pure).

At 4096 nodes a failing run has thousands of look-alike violations and outcomes
("node 17 ended 'timeout', expected 'ok': ..."). Each is folded with the others that read
the same once the node's own number is masked (``node 17`` and ``rank 17`` become
``node N`` and ``rank N``) and every other number (a pid, a port, a duration, another
node's number) is abstracted; the group is shown once, with its nodes as ranges and each
abstracted number as the range of what its nodes said (``waited 27.1-28.4 s`` with
an en dash; a number all of them said alike is shown as it is):
``[outcome] node N ended 'timeout', expected 'ok': ...  (nodes 0-2729, 2731-4095: 4095)``.
A group of one node keeps its own words.

* :func:`violation_folds`, :func:`outcome_folds` — the groups, in order of first node;
* :func:`fold_lines` — at most ``limit`` of them as lines, then one line for the rest;
* :func:`node_ranges`, :func:`short_ranges`, :func:`nodes_label` — node lists as ranges;
* :func:`shutdown_note` — the words a node's outcome gets when its shutdown failed;
* :func:`placement_line` — how the world ran the nodes (``nodes 1-4095: packed 512 per
  process``), when it says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from harness.run.model import NodeOutcome, Violation

__all__ = [
    "FOLD_ABOVE",
    "Fold",
    "abstract",
    "elapsed_range",
    "fill",
    "fold_lines",
    "group_message",
    "mask",
    "node_ranges",
    "nodes_label",
    "outcome_folds",
    "outcome_groups",
    "placement_line",
    "runs",
    "same_words",
    "short_ranges",
    "shutdown_note",
    "value_range",
    "violation_folds",
]


#: Runs of more than this many nodes fold their per-node lines in JUnit and in the HTML
#: report's table (the console's failure panel always folds).
FOLD_ABOVE = 64


_NUMBERED = re.compile(r"\b(node|rank) (\d+)(?!\.?\d)")


def mask(text: str, node: int, rank: int | None = None) -> str:
    """``text`` with ``node <node>`` and ``rank <rank>`` (a node's own number) written
    ``node N`` and ``rank N``, so that look-alike lines of different nodes compare equal."""
    own = {str(node)} if rank is None else {str(node), str(rank)}
    return _NUMBERED.sub(lambda m: f"{m[1]} N" if m[2] in own else m[0], text)


#: A number in a message: ``41234``, ``27.5``, ``127.0.0.1``, ``1.5s``, ``300ms`` (not
#: part of a word: ``F28``, ``round0``).
_VALUE = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?=(?:ms|s)?(?!\w))")
#: Where :func:`abstract` took a number out of a text.
_HOLE = "\x00"


def abstract(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with every number taken out, and the numbers in order: lines that differ
    only by pids, ports, durations or other nodes' numbers get the same template."""
    return _VALUE.sub(_HOLE, text), tuple(m[0] for m in _VALUE.finditer(text))


def _order(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:  # a dotted address: in text order
        return (1, 0.0, value)


def value_range(values: Iterable[str]) -> str:
    """``27.1-28.4`` (lowest to highest, an en dash between), or the value when all are
    the same."""
    ordered = sorted(set(values), key=_order)
    return ordered[0] if len(ordered) == 1 else f"{ordered[0]}\N{EN DASH}{ordered[-1]}"


def fill(template: str, said: Sequence[Sequence[str]]) -> str:
    """A template of :func:`abstract` with each hole the :func:`value_range` of what each
    member said there (``said`` holds each member's numbers, in order)."""
    parts = template.split(_HOLE)
    out = parts[0]
    for i, part in enumerate(parts[1:]):
        out += value_range(values[i] for values in said) + part
    return out


def same_words(one: str, other: str) -> bool:
    """Whether two texts differ at most by their numbers (:func:`abstract`)."""
    return abstract(one)[0] == abstract(other)[0]


def runs(indexes: Iterable[int]) -> list[tuple[int, int]]:
    """Consecutive runs of ``indexes`` as ``(first, last)`` pairs."""
    found: list[list[int]] = []
    for i in sorted(set(indexes)):
        if found and i == found[-1][1] + 1:
            found[-1][1] = i
        else:
            found.append([i, i])
    return [(a, b) for a, b in found]


def node_ranges(nodes: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"`` (compact even for 256 nodes)."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs(nodes))


def short_ranges(nodes: Iterable[int], most: int = 8) -> str:
    """:func:`node_ranges` of at most ``most`` runs: ``0-2729, 2731-4095``, or
    ``0, 2, 4, 6, 8, 10, 12, …, 4094`` (the first runs, then the last)."""
    parts = node_ranges(nodes).split(", ")
    if len(parts) <= most:
        return ", ".join(parts)
    return ", ".join([*parts[: most - 1], "\N{HORIZONTAL ELLIPSIS}", parts[-1]])


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
    """Nodes whose lines read the same: ``line`` (node number masked, other numbers as the
    range of what the nodes said) and the first node's own ``sample``; ``count`` lines were
    folded; :attr:`text` is what is shown."""

    nodes: list[int]
    line: str
    sample: str
    count: int = 1

    @property
    def text(self) -> str:
        return self.sample if self.count == 1 else self.line


def _fold(items: Iterable[tuple[Hashable, Sequence[int], str, str]]) -> list[Fold]:
    """Group ``(key, nodes, masked line, own line)`` by key and by the masked line's
    template (:func:`abstract`), in order of first appearance."""
    groups: dict[Hashable, tuple[Fold, str, list[tuple[str, ...]]]] = {}
    for key, nodes, line, sample in items:
        template, values = abstract(line)
        if (key, template) in groups:
            fold, _, said = groups[key, template]
            fold.nodes.extend(nodes)
            fold.count += 1
            said.append(values)
        else:
            groups[key, template] = (Fold(list(nodes), line, sample), template, [values])
    for fold, template, said in groups.values():
        fold.line = fill(template, said)
    return [fold for fold, _, _ in groups.values()]


def group_message(group: Sequence[NodeOutcome]) -> str:
    """The message of nodes that ended alike: the first node's, with each node's number
    masked and other numbers as the range of what the nodes that said the same words said
    (empty when the first has none). A group judged more coarsely (a timeline band) may
    hold nodes that said other things: the message then says how many said it."""
    first = group[0]
    if not first.message:
        return ""
    template = abstract(mask(first.message, first.node, first.rank))[0]
    said = []
    for o in group:
        if o.message:
            other, values = abstract(mask(o.message, o.node, o.rank))
            if other == template:
                said.append(values)
    message = fill(template, said)
    if len(said) < len(group):
        message += f" ({len(said)} of {len(group)} nodes said this; the others other things)"
    return message


def violation_folds(violations: Sequence[Violation], fold: bool = True) -> list[Fold]:
    """Violations of one node that read the same but for that node's number, folded;
    ``line``/``sample`` are ``[check] message``. A violation naming several nodes (or none)
    stays alone, and so does every one when ``fold`` is false."""

    def item(i: int, v: Violation) -> tuple[Hashable, Sequence[int], str, str]:
        own = f"[{v.check}] {v.message}"
        if len(v.nodes) != 1 or not fold:
            return (i,), v.nodes, own, own
        masked = f"[{v.check}] {mask(v.message, v.nodes[0])}"
        return (v.check, v.known), v.nodes, masked, own

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


def shutdown_note(o: NodeOutcome) -> str:
    """`` (its shutdown failed: RuntimeError: ...)`` after a node's outcome, or nothing."""
    return f" (its shutdown failed: {o.shutdown_error})" if o.shutdown_error else ""


def outcome_groups(outcomes: Sequence[NodeOutcome]) -> list[list[NodeOutcome]]:
    """Nodes that ended alike: same status, error, message (and shutdown error) but for
    their own number and other numbers (:func:`abstract`), world size, and rank (their own
    node id, none, or the same other rank); in order of first node."""
    keyed: dict[tuple[str | int | None, ...], list[NodeOutcome]] = {}
    for o in sorted(outcomes, key=lambda o: o.node):
        rank = "" if o.rank is None else "same" if o.rank == o.node else str(o.rank)
        message, shutdown = (
            abstract(mask(text, o.node, o.rank))[0] if text else ""
            for text in (o.message, o.shutdown_error)
        )
        key = (o.status, o.error_class, message, shutdown, o.world_size, rank)
        keyed.setdefault(key, []).append(o)
    return list(keyed.values())


def elapsed_range(group: Sequence[NodeOutcome]) -> str:
    """``6.17-6.61 s`` (``3.010 s`` for one time; empty when none is known)."""
    times = [o.elapsed for o in group if o.elapsed is not None]
    if not times:
        return ""
    low, high = min(times), max(times)
    return f"{low:.3f} s" if high - low < 0.0005 else f"{low:.2f}-{high:.2f} s"


def outcome_folds(outcomes: Sequence[NodeOutcome], own: Callable[[NodeOutcome], str]) -> list[Fold]:
    """:func:`outcome_groups` as folds: ``line`` reads ``ok, rank = node, world size 4096,
    after 6.17-6.61 s``; ``sample`` is ``own(first node)``."""
    folds = []
    for group in outcome_groups(outcomes):
        first = group[0]
        if first.rank is None:
            rank = ""
        else:
            rank = "rank = node" if first.rank == first.node else f"rank {first.rank}"
        elapsed = elapsed_range(group)
        line = _outcome_words(first, rank, f"after {elapsed}" if elapsed else "")
        if first.message:
            line += f" \N{EM DASH} {first.error_class or 'message'}: {group_message(group)}"
        line += shutdown_note(first)
        folds.append(Fold([o.node for o in group], line, own(first), len(group)))
    return folds


def fold_lines(
    folds: Sequence[Fold], limit: int | None = None, fmt: Callable[[Fold], str] | None = None
) -> list[str]:
    """One line per fold (``fmt``, by default ``nodes ...: text``), at most ``limit`` of
    them, then ``... and K more (M nodes)``."""

    def default(fold: Fold) -> str:
        return fold.text if fold.count == 1 else f"{nodes_label(fold.nodes)}: {fold.line}"

    shown = folds if limit is None else folds[:limit]
    lines = [(fmt or default)(f) for f in shown]
    rest = folds[len(shown) :]
    if rest:
        count = sum(len(f.nodes) for f in rest)
        lines.append(f"... and {len(rest)} more ({count} node{'s' if count != 1 else ''})")
    return lines


def placement_line(outcomes: Sequence[NodeOutcome], limit: int = 6) -> str | None:
    """``nodes 0: process; nodes 1-4095: packed 512 per process`` — how the world ran the
    nodes, grouped by the world's words (None when it says nothing of any node; an absent
    node ``never started``)."""
    if all(o.placement is None for o in outcomes):
        return None
    groups: dict[str, list[int]] = {}
    for o in sorted(outcomes, key=lambda o: o.node):
        said = o.placement or ("never started" if o.status == "absent" else "not said")
        groups.setdefault(said, []).append(o.node)
    parts = [f"{nodes_label(nodes)}: {text}" for text, nodes in list(groups.items())[:limit]]
    if len(groups) > limit:
        rest = sum(len(nodes) for nodes in list(groups.values())[limit:])
        parts.append(f"{len(groups) - limit} more placements on {rest} nodes")
    return "; ".join(parts)
