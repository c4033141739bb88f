"""The node's proof that the store is shared: every rank's key seen, O(world size) reads."""

from __future__ import annotations

import threading
from typing import Any

from harness.world.node import _prove_shared
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


def run_ranks(store_of: Any, world_size: int) -> dict[int, Any]:
    results: dict[int, Any] = {}

    def one(rank: int) -> None:
        result: dict[str, Any] = {}
        try:
            result["ok"] = _prove_shared(store_of(rank), rank, world_size, rank, result)
        except Exception as exc:
            result["error"] = exc
        results[rank] = result

    threads = [threading.Thread(target=one, args=(r,)) for r in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_every_rank_of_a_shared_store_sees_every_rank_with_linear_reads() -> None:
    store = CountingStore(timeout=30)
    world = 64
    results = run_ranks(lambda rank: store, world)
    assert all(r["ok"] is True for r in results.values()), results
    assert all(r["seen_ranks"] == list(range(world)) for r in results.values())
    # rank 0 asks for every key a few times (wait, multi_get, the done keys), every other
    # rank for a couple of keys: linear in the world size (every rank reading every key
    # would be world * world = 4096)
    assert store.asked < 8 * world


def test_a_rank_on_a_store_of_its_own_does_not_pass_and_says_what_it_saw() -> None:
    shared, alone = CountingStore(timeout=0.5), CountingStore(timeout=0.5)
    results = run_ranks(lambda rank: alone if rank == 2 else shared, 4)
    assert all("error" in r and "ok" not in r for r in results.values())
    assert results[0]["seen_ranks"] == [0, 1, 3]  # rank 0 names whose keys it saw
    assert results[1]["seen_ranks"] == [0, 1]  # its own and rank 0's
    assert results[2]["seen_ranks"] == [2]  # rank 0's key is not in its store


def test_a_rank_told_another_world_size_waits_instead_of_passing() -> None:
    store = CountingStore(timeout=0.5)
    results: dict[int, Any] = {}

    def one(rank: int, world_size: int) -> None:
        result: dict[str, Any] = {}
        try:
            result["ok"] = _prove_shared(store, rank, world_size, rank, result)
        except Exception as exc:
            result["error"] = exc
        results[rank] = result

    threads = [threading.Thread(target=one, args=(r, 5 if r == 3 else 4)) for r in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert "error" in results[3] and "ok" not in results[3]  # it waits for a world of 5
    assert "error" in results[0]  # and rank 0 for its "done"
    assert results[1]["ok"] is True and results[2]["ok"] is True
