"""After a node's rendezvous returned: prove that the store it got is one store shared by
every rank, with O(world size) work in all (:func:`prove_shared`).

Every rank writes its key and counts itself in; rank 0 waits for every rank's key, then
writes ``all/<world size>`` (the ranks it did not see, if any); every other rank waits for
``all/<its world size>`` (so a node told another world size waits, as it did for keys of
ranks that do not exist). A rank that
reads ``all`` from its store shares that store with a rank 0 that saw every key there, so it
saw (through rank 0) every rank's key: every rank reading every key would cost the store
host world size squared reads (16 million at 4096 nodes). Node 0 (the store
host, which need not be rank 0 where the backend ranks the nodes itself, as torch's c10d
does) then waits until every node that counted itself in is done (two nodes given one rank
are two), so its shutdown cannot cut the others off: each
rank's last request is the one that counts it done, and only the host polls that count (a
rank 0 on another node polling it too could have its last poll cut off by the host's end).

A rank whose rendezvous returned may die before it writes (a scenario kills it on
``complete``; at 10,000 nodes one process is lost to the machine): rank 0 waits for the
missing keys only while ranks keep arriving. Once no rank has counted itself in for a
quiet window (:func:`quiet_for`: 10 s, or half the join timeout when shorter), it writes ``all``
with the ranks it did not see, so the others go on with the
world the rendezvous gave them, and ``seen_ranks`` says who never wrote (the checks judge
that). A store that fails is raised as it is.

Only rank 0 does work in the world size (it names every rank's key): a rank other than 0
does a constant amount, and what it saw is kept as rank 0's word, the ranks rank 0 did not
see (:attr:`Seen.all_but`), not as the list of all the others. At 10,240 packed nodes every
rank naming every key cost 100 million strings, built by 512 threads of a process at once
(each waking every 5 ms to ask for the GIL), and every rank's list of the others 100
million ints sent to the harness (8.6 GiB of memory); neither run finished in 300 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["QUIET_SECONDS", "Seen", "prove_shared", "quiet_for"]

#: The longest rank 0 waits while no rank arrives; shorter for a short join (:func:`quiet_for`).
QUIET_SECONDS: Final = 10.0
#: Written by rank 0 once it has seen the ranks' keys, per world size: the ranks it did not see.
_ALL: Final = "harness/all/{}"
_COUNT: Final = "harness/count/{}"
_DONE_COUNT: Final = "harness/done-count/{}"


def quiet_for(join_timeout: float) -> float:
    """How long rank 0 waits while no rank arrives: :data:`QUIET_SECONDS`, or half the join
    timeout when that is shorter. The other ranks wait for rank 0's word for their store's
    own timeout (the join timeout, in every backend the harness runs), so rank 0 must decide
    well within it; and a short scenario's hard deadline leaves no 10 s to spare."""
    return max(min(QUIET_SECONDS, join_timeout / 2), 0.1)


@dataclass
class Seen:
    """What a node saw of the ranks' keys in its store.

    Attributes:
        ranks: the ranks whose key it found (None: it never looked, or ``all_but`` says).
        all_but: on a rank other than 0 that got rank 0's word: rank 0 found the key of
            every rank below the world size but these (None: it got no word).
    """

    ranks: list[int] | None = None
    all_but: list[int] | None = None


def prove_shared(
    store: Any, rank: int, world_size: int, node: int, seen: Seen, quiet: float
) -> bool:
    """Run the proof of the module doc on ``store`` (this node's rendezvous store).

    ``seen`` records whose keys this node saw: on rank 0 every rank that wrote
    (``ranks``); on the others the ranks rank 0 did not see (``all_but``), or, when the
    wait fails, which of its own key and rank 0's are present by then (``ranks``). A
    rank that never wrote never took part in the world the rendezvous returned (the
    harness judges that, whatever the backend). ``quiet``: the seconds without an arrival
    after which rank 0 goes on with the ranks it saw (:func:`quiet_for`); the other ranks
    wait for rank 0's word for their store's own timeout.

    Returns:
        Whether this node saw what the proof promises (rank 0: every present key readable;
        the others: rank 0's ``all`` for its world size, naming it among the present).

    Raises:
        Exception: the store failed or timed out (its own error, whatever the backend):
            rank 0's word never came (it is gone, or on another store).
    """
    store.set(f"harness/rank/{rank}", str(node))
    store.add(_COUNT.format(world_size), 1)  # after the key, on the same connection
    # Only rank 0 names every rank's key (module doc); the others name their own and rank 0's.
    keys = [_key(r) for r in range(world_size)] if rank == 0 else sorted({_key(0), _key(rank)})
    try:
        everyone = _ALL.format(world_size)  # a node told another world size never sees it
        if rank == 0:
            _count_to(store, _COUNT.format(world_size), world_size, quiet)
            present = keys_present(store, keys)
            ok = len(store.multi_get([keys[r] for r in present])) == len(present)
            missing = sorted(set(range(world_size)) - set(present))
            store.set(everyone, ",".join(map(str, missing)))  # small: read by every rank
            seen.ranks = present
        else:
            store.wait([everyone])  # the store's own timeout: rank 0 decides well within it
            missing = [int(r) for r in store.get(everyone).decode().split(",") if r]
            ok = 0 <= rank < world_size and rank not in missing
            seen.all_but = missing
    except BaseException:
        # Every rank asks for the keys it named: a failing world costs the store O(world
        # size) checks too.
        seen.ranks = _present(store, keys)
        raise
    # The last request of every rank but the store host's: once the host has counted it,
    # it may end (a request after it could find the store gone, its reply cut in flight).
    store.add(_DONE_COUNT.format(world_size), 1)
    if node == 0:
        # every node that counted itself in, which is more than the ranks rank 0 saw when
        # two nodes were given one rank (a launcher's bug a scenario reproduces)
        arrived = int(store.add(_COUNT.format(world_size), 0))
        target = max(world_size - len(missing), arrived)
        _count_to(store, _DONE_COUNT.format(world_size), target, quiet)
    return ok


def _key(rank: int) -> str:
    return f"harness/rank/{rank}"


def _count_to(
    store: Any,
    counter: str,
    target: int,
    quiet: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Poll ``counter`` (one ADD of 0 a time, backing off to 0.25 s) until it reaches
    ``target`` or has not grown for ``quiet`` seconds; its last value. No timed-out WAIT:
    cancelling one on a loaded store can cost the connection."""
    last, since, pause = int(store.add(counter, 0)), clock(), 0.01
    while last < target:
        sleep(pause)
        pause = min(pause * 2, 0.25)
        now = int(store.add(counter, 0))
        if now > last:
            last, since = now, clock()
        elif clock() - since >= quiet:
            break
    return last


def keys_present(store: Any, keys: list[str]) -> list[int]:
    """The ranks of the ``harness/rank/<r>`` ``keys`` in the store: one CHECK of them all
    when all are there, else one per key."""
    if store.check(keys):
        return [_rank(key) for key in keys]
    return _present_ranks(store, keys)


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
