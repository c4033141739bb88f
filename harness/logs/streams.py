"""Which node said it: the lines of the logs, grouped into one stream per node.

A harness report names the node on each line. Otherwise a stream is one input file, split
further by process id where the format carries one (glog, NCCL, ``Process P hosts``) so
that several nodes' lines pasted into one file come apart; an undated, pid-less line
belongs to the last stream of its file. A stream's node is the rank it states (rdzv's
``rank=R``, torch's ``as rank R``, ``group_rank=R``, ``rank R (join timeout``); a stream
that states none takes a number from its file name (``node-3.log``) if free, else the
lowest free node id, and that choice is named as an assumption. Two streams that state
the same rank are a duplicate claim: the second keeps its claimed rank as an ``override``
and takes a free node id.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.logs.lines import Line
from harness.logs.signals import Observation

__all__ = ["Stream", "group"]

_NUMBER_IN_NAME = re.compile(r"(?:node|rank|host|worker)[-_]?(\d+)", re.IGNORECASE)


@dataclass
class Stream:
    """One node's lines and observations."""

    key: tuple[str, str | None]
    lines: list[Line] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    node: int | None = None
    #: The rank it claimed when that differs from its node id (a duplicate claim).
    claimed_rank: int | None = None
    #: How its node id was found (for the explanation).
    how: str = ""

    def stated_ranks(self) -> list[int]:
        return [o.data["rank"] for o in self.observations if o.kind == "rank"]


def _stream_of(
    streams: dict[tuple[str, str | None], Stream],
    last: dict[str, tuple[str, str | None]],
    line: Line,
    rank: int | None,
) -> Stream:
    if line.pid is not None:
        key: tuple[str, str | None] = (line.source, f"pid {line.pid}")
    elif rank is not None:
        key = (line.source, f"rank {rank}")
    else:
        key = last.get(line.source, (line.source, None))
    last[line.source] = key
    return streams.setdefault(key, Stream(key))


def _interleaved(read: Sequence[tuple[Line, list[Observation]]]) -> set[str]:
    """The sources whose pid-less lines state more than one rank: several nodes' lines
    pasted into one file, told apart by the rank each line states."""
    ranks: dict[str, set[int]] = {}
    for line, observations in read:
        if line.pid is None:
            stated = {o.data["rank"] for o in observations if o.kind == "rank"}
            ranks.setdefault(line.source, set()).update(stated)
    return {source for source, seen in ranks.items() if len(seen) > 1}


def _fold_leading(streams: dict[tuple[str, str | None], Stream]) -> None:
    """A file's first lines that stated nothing belong to its first stream that did."""
    for key, stream in list(streams.items()):
        if key[1] is not None or stream.stated_ranks():
            continue
        others = [s for k, s in streams.items() if k[0] == key[0] and k[1] is not None]
        if others and stream.lines:
            others[0].lines[:0] = stream.lines
            others[0].observations[:0] = stream.observations
            del streams[key]


def group(
    read: Sequence[tuple[Line, list[Observation]]], sources: Sequence[str]
) -> tuple[list[Stream], list[str]]:
    """Group ``read`` (every line with what it says, in input order) into streams with a
    node id each; also returns the assumptions made on the way."""
    explicit: dict[int, Stream] = {}
    streams: dict[tuple[str, str | None], Stream] = {}
    last: dict[str, tuple[str, str | None]] = {}
    for source in sources:  # a file with no line is a node that wrote nothing
        streams.setdefault((source, None), Stream((source, None)))
    split = _interleaved(read)
    for line, observations in read:
        named = [o.node for o in observations if o.node is not None]
        node = line.node if line.node is not None else (named[0] if named else None)
        if node is not None:
            stream = explicit.setdefault(
                node, Stream(("report", f"node {node}"), node=node, how="named")
            )
        else:
            stated = [o.data["rank"] for o in observations if o.kind == "rank"]
            rank = stated[0] if stated and line.source in split else None
            stream = _stream_of(streams, last, line, rank)
        stream.lines.append(line)
        stream.observations.extend(observations)
    _fold_leading(streams)
    assumptions: list[str] = []
    pending = [s for s in streams.values() if s.lines or len(sources) > 1]
    # streams split by pid whose first pid-less part is empty are not nodes
    pending = [s for s in pending if s.lines or s.key[1] is None]
    taken: dict[int, Stream] = dict(explicit)
    unplaced: list[Stream] = []
    for stream in pending:
        ranks = stream.stated_ranks()
        if not ranks:
            unplaced.append(stream)
            continue
        rank = max(set(ranks), key=ranks.count)
        if rank in taken:
            if taken[rank] is not stream and taken[rank].how != "named":
                stream.claimed_rank = rank
                unplaced.append(stream)
            else:
                taken[rank].lines.extend(stream.lines)
                taken[rank].observations.extend(stream.observations)
            continue
        stream.node, stream.how = rank, f"it states rank {rank}"
        taken[rank] = stream
    for stream in unplaced:
        hinted = _NUMBER_IN_NAME.search(stream.key[0])
        if hinted and int(hinted[1]) not in taken and stream.claimed_rank is None:
            stream.node = int(hinted[1])
            stream.how = f"its file name {stream.key[0]!r} says so"
        else:
            causes = {o.data["cause"] for o in stream.observations if o.kind == "cause"}
            client = bool(causes) and "addr_in_use" not in causes  # a bind failure is the host's
            client = client and not any(o.kind == "store_host" for o in stream.observations)
            low = 1 if client else 0  # a node that could not reach the store did not host it
            stream.node = next(i for i in range(low, len(taken) + 2) if i not in taken)
            stream.how = (
                "it failed to reach the store, so it is not the store host (node 0): the "
                "lowest other id free"
                if client
                else "the lowest node id free"
            )
        taken[stream.node] = stream
        what = (
            "a duplicate claim of rank " + str(stream.claimed_rank)
            if stream.claimed_rank is not None
            else "no rank stated"
        )
        where = stream.key[0] + (f" ({stream.key[1]})" if stream.key[1] is not None else "")
        assumptions.append(f"the lines of {where} ({what}) are node {stream.node}: {stream.how}")
    return sorted(taken.values(), key=lambda s: s.node or 0), assumptions
