"""After a node's rendezvous returned: prove that the store it got is one store shared by
every rank, with O(world size) work in all (:func:`prove_shared`).

Every rank writes its key and counts itself in; rank 0 waits for every rank's key, then
writes ``all/<world size>`` (the ranks it did not see, if any); every other rank waits for
``all/<its world size>`` (so a node told another world size waits, as it did for keys of
ranks that do not exist). A rank that
reads ``all`` from its store shares that store with a rank 0 that saw every key there, so it
saw (through rank 0) every rank's key: every rank reading every key would cost the store
host world size squared reads (16 million at 4096 nodes). Rank 0, and node 0 (the store
host, which need not be rank 0 where the backend ranks the nodes itself, as torch's c10d
does), then wait until every rank is done, so neither's shutdown can cut the others off.

A rank whose rendezvous returned may die before it writes (a scenario kills it on
``complete``; at 10,000 nodes one process is lost to the machine): rank 0 waits for the
missing keys only while ranks keep arriving. Once no rank has counted itself in for a
quiet window (:func:`quiet_for`: 10 s, or the join timeout when shorter), it writes ``all``
with the ranks it did not see, so the others go on with the
world the rendezvous gave them, and ``seen_ranks`` says who never wrote (the checks judge
that). A store that fails is raised as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

__all__ = ["QUIET_SECONDS", "Seen", "prove_shared", "quiet_for"]

#: The longest rank 0 waits while no rank arrives; shorter for a short join (:func:`quiet_for`).
QUIET_SECONDS: Final = 10.0
#: Written by rank 0 once it has seen the ranks' keys, per world size: the ranks it did not see.
_ALL: Final = "harness/all/{}"
_COUNT: Final = "harness/count/{}"
_DONE: Final = "harness/done/{}/{}"
_DONE_COUNT: Final = "harness/done-count/{}"


def quiet_for(join_timeout: float) -> float:
    """How long rank 0 waits while no rank arrives: :data:`QUIET_SECONDS`, or the join timeout
    when shorter (the hard deadline of a short scenario leaves no 10 s to spare)."""
    return max(min(QUIET_SECONDS, join_timeout), 0.1)


@dataclass
class Seen:
    """The ranks whose key a node saw in its store (None: it never looked)."""

    ranks: list[int] | None = None


def prove_shared(
    store: Any, rank: int, world_size: int, node: int, seen: Seen, quiet: float
) -> bool:
    """Run the proof of the module doc on ``store`` (this node's rendezvous store).

    ``seen.ranks`` records whose keys this node saw: on rank 0 every rank that
    wrote; on the others every rank rank 0 saw, or, when the wait fails, those present by
    then. A rank that never wrote never took part in the world the rendezvous returned (the
    harness judges that, whatever the backend). ``quiet``: the seconds without an arrival
    after which rank 0 goes on with the ranks it saw (:func:`quiet_for`; it decides within
    two such windows of the last arrival); the other ranks wait for rank 0's word while
    ranks arrive and for three windows after the last one.

    Returns:
        Whether this node saw what the proof promises (rank 0: every present key readable;
        the others: rank 0's ``all`` for its world size, naming it among the present).

    Raises:
        TimeoutError: rank 0's word never came (it is gone, or on another store).
        Exception: the store failed (its own error, whatever the backend).
    """
    store.set(f"harness/rank/{rank}", str(node))
    store.add(_COUNT.format(world_size), 1)
    keys = [f"harness/rank/{r}" for r in range(world_size)]
    arrivals = _COUNT.format(world_size)
    try:
        everyone = _ALL.format(world_size)  # a node told another world size never sees it
        if rank == 0:
            _wait_while_arriving(store, keys, arrivals, quiet)
            present = _present_ranks(store, keys)
            ok = len(store.multi_get([keys[r] for r in present])) == len(present)
            missing = sorted(set(range(world_size)) - set(present))
            store.set(everyone, ",".join(map(str, missing)))  # small: read by every rank
        else:
            # rank 0 decides within two windows of the last arrival: wait three
            if not _wait_while_arriving(store, [everyone], arrivals, 3 * quiet):
                raise TimeoutError(
                    f"rank {rank} never read {everyone}: rank 0 did not write it within"
                    f" {3 * quiet:g} s of the last rank's arrival (is its store this one?)"
                )
            missing = [int(r) for r in store.get(everyone).decode().split(",") if r]
            present = [r for r in range(world_size) if r not in missing]
            ok = rank in present
    except BaseException:
        # Rank 0 asks for every key; the others for their own and rank 0's, so a failing
        # world costs the store O(world size) checks too.
        asked = keys if rank == 0 else sorted({keys[0], keys[rank]})
        seen.ranks = _present(store, asked)
        raise
    seen.ranks = present
    store.add(_DONE_COUNT.format(world_size), 1)
    store.set(_DONE.format(world_size, rank), "1")  # the last request: node 0 may end once seen
    if rank == 0 or node == 0:
        done = [_DONE.format(world_size, r) for r in present]
        _wait_while_arriving(store, done, _DONE_COUNT.format(world_size), quiet)
    return ok


def _wait_while_arriving(store: Any, keys: list[str], counter: str, quiet: float) -> bool:
    """Wait for ``keys`` while ranks keep arriving (``counter`` grows); whether they all
    came (False: no arrival for ``quiet`` seconds)."""
    window = timedelta(seconds=quiet)
    last = int(store.add(counter, 0))
    while True:
        try:
            store.wait(keys, window)
            return True
        except Exception:
            # a timeout, or the store failed: asking the counter tells which
            arrived = int(store.add(counter, 0))
        if arrived <= last:
            return False
        last = arrived


def _rank(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


def _present_ranks(store: Any, keys: list[str]) -> list[int]:
    return [_rank(key) for key in keys if store.check([key])]


def _present(store: Any, keys: list[str]) -> list[int]:
    """The ranks of the ``harness/rank/<r>`` ``keys`` the store holds now ([] when the store
    cannot be asked)."""
    try:
        return _present_ranks(store, keys)
    except Exception:  # the store is gone: nothing can be said
        return []
