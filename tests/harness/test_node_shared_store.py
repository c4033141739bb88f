"""The node's proof that the store is shared: every rank's key seen, O(world size) reads."""

from __future__ import annotations

import threading
from typing import Any

from harness.world.process.shared_store import QUIET_SECONDS, Seen, prove_shared, quiet_for
from rdzv import HashStore


class CountingStore(HashStore):
    """A HashStore that counts the keys asked for (wait, get, multi_get, check)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(timeout)
        self.asked = 0
        self._count = threading.Lock()

    def _ask(self, n: int) -> None:
        with self._count:
            self.asked += n

    def wait(self, keys: Any, timeout: Any = None) -> None:
        self._ask(len(keys))
        super().wait(keys, timeout)

    def multi_get(self, keys: Any) -> list[bytes]:
        self._ask(len(keys))
        return super().multi_get(keys)

    def check(self, keys: Any) -> bool:
        self._ask(len(keys))
        return super().check(keys)


def run_ranks(
    store_of: Any, world_size: int, absent: set[int] = frozenset(), quiet: float = 0.2
) -> dict[int, Any]:
    results: dict[int, Any] = {}

    def one(rank: int) -> None:
        result: dict[str, Any] = {}
        seen = Seen()
        try:
            result["ok"] = prove_shared(store_of(rank), rank, world_size, rank, seen, quiet)
        except Exception as exc:
            result["error"] = exc
        result["seen_ranks"] = seen.ranks
        results[rank] = result

    ranks = [r for r in range(world_size) if r not in absent]
    threads = [threading.Thread(target=one, args=(r,)) for r in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_every_rank_of_a_shared_store_sees_every_rank_with_linear_reads() -> None:
    store = CountingStore(timeout=30)
    world = 64
    results = run_ranks(lambda rank: store, world, quiet=QUIET_SECONDS)
    assert all(r["ok"] is True for r in results.values()), results
    assert all(r["seen_ranks"] == list(range(world)) for r in results.values())
    # rank 0 asks for every key a few times (wait, multi_get, the done keys), every other
    # rank for a couple of keys: linear in the world size (every rank reading every key
    # would be world * world = 4096)
    assert store.asked < 8 * world


def test_a_rank_on_a_store_of_its_own_does_not_pass_and_the_others_name_it_unseen() -> None:
    shared, alone = CountingStore(timeout=30), CountingStore(timeout=0.5)
    results = run_ranks(lambda rank: alone if rank == 2 else shared, 4)
    assert "error" in results[2] and "ok" not in results[2]
    assert results[2]["seen_ranks"] == [2]  # rank 0's key is not in its store
    for rank in (0, 1, 3):  # rank 0 saw no key of rank 2's: the checks judge that
        assert results[rank]["ok"] is True and results[rank]["seen_ranks"] == [0, 1, 3]


def test_a_rank_that_died_after_its_rendezvous_does_not_hold_the_others() -> None:
    # rank 2 never writes its key (killed once its rendezvous returned); the store's own
    # timeout is far away: rank 0 gives up on it once nobody arrives, not at the timeout
    store = CountingStore(timeout=3600)
    results = run_ranks(lambda rank: store, 4, absent={2})
    for rank in (0, 1, 3):
        assert results[rank]["ok"] is True, results
        assert results[rank]["seen_ranks"] == [0, 1, 3]


def test_a_rank_told_another_world_size_waits_instead_of_passing() -> None:
    store = CountingStore(timeout=5)
    results: dict[int, Any] = {}

    def one(rank: int, world_size: int) -> None:
        result: dict[str, Any] = {}
        seen = Seen()
        try:
            result["ok"] = prove_shared(store, rank, world_size, rank, seen, 0.2)
        except Exception as exc:
            result["error"] = exc
        result["seen_ranks"] = seen.ranks
        results[rank] = result

    threads = [threading.Thread(target=one, args=(r, 5 if r == 3 else 4)) for r in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "error" in results[3] and "ok" not in results[3]  # it waits for a world of 5
    # the others pass (rank 0 stops waiting for rank 3's "done"); the world-size check
    # judges the mismatch
    assert all(results[r]["ok"] is True for r in (0, 1, 2)), results


def test_the_quiet_window_is_the_join_timeout_when_that_is_shorter() -> None:
    assert quiet_for(3.0) == 1.5  # within the others' store timeout, and the hard deadline
    assert quiet_for(180.0) == QUIET_SECONDS
