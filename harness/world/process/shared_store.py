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
missing keys only while ranks keep arriving. Once no rank has counted itself in for
:data:`QUIET_SECONDS`, it writes ``all`` with the ranks it saw, so the others go on with the
world the rendezvous gave them, and ``seen_ranks`` says who never wrote (the checks judge
that). A store that fails is raised as it is.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

__all__ = ["QUIET_SECONDS", "prove_shared"]

#: Rank 0 stops waiting for the missing ranks' keys once no rank arrived for this long.
QUIET_SECONDS: Final = 10.0
#: Written by rank 0 once it has seen the ranks' keys, per world size.
_ALL: Final = "harness/all/{}"
_COUNT: Final = "harness/count/{}"


def prove_shared(store: Any, rank: int, world_size: int, node: int, result: dict[str, Any]) -> bool:
    """Run the proof of the module doc on ``store`` (this node's rendezvous store).

    ``result["seen_ranks"]`` records whose keys this node saw: on rank 0 every rank that
    wrote; on the others every rank, or, when the wait fails, those present by then. A rank
    that never wrote never took part in the world the rendezvous returned (the harness
    judges that, whatever the backend).

    Returns:
        Whether this node saw what the proof promises (rank 0: every present key readable;
        the others: rank 0's ``all`` for its world size).

    Raises:
        Exception: the store failed (its own error, whatever the backend).
    """
    store.set(f"harness/rank/{rank}", str(node))
    store.add(_COUNT.format(world_size), 1)
    keys = [f"harness/rank/{r}" for r in range(world_size)]
    try:
        everyone = _ALL.format(world_size)  # a node told another world size never sees it
        if rank == 0:
            seen = _wait_while_arriving(store, keys, _COUNT.format(world_size))
            ok = len(store.multi_get([keys[r] for r in seen])) == len(seen)
            missing = sorted(set(range(world_size)) - set(seen))
            store.set(everyone, ",".join(map(str, missing)))  # small: read by every rank
        else:
            store.wait([everyone])
            missing = [int(r) for r in store.get(everyone).decode().split(",") if r]
            seen = [r for r in range(world_size) if r not in missing]
            ok = rank in seen
    except BaseException:
        # Rank 0 asks for every key; the others for their own and rank 0's, so a failing
        # world costs the store O(world size) checks too.
        asked = keys if rank == 0 else sorted({keys[0], keys[rank]})
        result["seen_ranks"] = _present(store, asked)
        raise
    result["seen_ranks"] = seen
    store.set(f"harness/done/{rank}", "1")
    if rank == 0 or node == 0:
        _wait_while_arriving(
            store, [f"harness/done/{r}" for r in seen], _COUNT.format(world_size), done=True
        )
    return ok


def _wait_while_arriving(
    store: Any, keys: list[str], counter: str, *, done: bool = False
) -> list[int]:
    """Wait for ``keys`` while ranks keep arriving (``counter`` grows); the indices in
    ``keys``' rank order of those present when every key is there or arrivals stop."""
    quiet = timedelta(seconds=QUIET_SECONDS)
    last = int(store.add(counter, 0))
    while True:
        try:
            store.wait(keys, quiet)
            return [_rank(key) for key in keys]
        except Exception:
            # a timeout, or the store failed: asking the counter tells which
            arrived = int(store.add(counter, 0))
        if done or arrived <= last:
            return _present_ranks(store, keys)
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
