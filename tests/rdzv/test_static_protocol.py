"""The join protocol in process, over an in-memory store: verdict races and corrupt state.

Invariants of :mod:`rdzv.rendezvous._join` covered: 1 (one verdict decides: a completing
node acts on another verdict), 2 (complete only with every confirmation), 3 (a deadline that
passes as the round completes still returns success) and 11 (a member that times out alone
names the missing ranks).
"""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
from round_config import round_cfg

from rdzv.errors import RendezvousStateError, RendezvousTimeoutError, StoreTimeoutError
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_state import Identity, RoundKeys, format_ranks
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.base import HashStore


def _cfg(rank: int, world_size: int = 2, run_id: str = "run") -> StaticConfig:
    return round_cfg(rank, world_size, run_id=run_id)


def _identity(rank: int, world_size: int = 2) -> Identity:
    return Identity("host", 1000 + rank, rank, world_size, f"token{rank}")


def _protocol(store: Any, rank: int, world_size: int = 2, deadline: float = 5.0) -> RoundProtocol:
    ticks = itertools.count()
    return RoundProtocol(
        store,
        _cfg(rank, world_size),
        _identity(rank, world_size),
        0,
        deadline,
        clock=lambda: next(ticks) * 0.001,
        wall=lambda: 1.0,
    )


class _CompletesAtTheDeadline(HashStore):
    """The other member completes the round just as this node's wait times out."""

    def __init__(self) -> None:
        super().__init__()
        self.done = RoundKeys("run").of(0, "done")

    def get(self, key: str) -> bytes:
        if key == self.done and not self.check([key]):
            other = _identity(1)
            verdict = {"status": "complete", "by": other.as_dict(), "at": 1.0}
            self.compare_set(key, "", json.dumps(verdict))
            raise StoreTimeoutError(f"wait timeout after 5000ms, keys: /{key}")
        return super().get(key)


def test_a_member_whose_deadline_passes_as_the_round_completes_returns_success() -> None:
    store = _CompletesAtTheDeadline()
    _protocol(store, rank=0).join()  # the complete verdict wins over the local deadline
    assert store.get(RoundKeys("run").of(0, "ack/0")) == b"1"


def test_a_member_that_times_out_alone_names_itself_present_and_the_rest_missing() -> None:
    store = HashStore()
    with pytest.raises(
        RendezvousTimeoutError, match=r"1 of 4 nodes joined; missing ranks: 0-1, 3\."
    ):
        _protocol(store, rank=2, world_size=4, deadline=0.0).join()
    verdict = json.loads(store.get(RoundKeys("run").of(0, "done")))
    assert (verdict["status"], verdict["reason"]) == ("aborted", "timeout")


def test_junk_under_the_reserved_prefix_is_reported_as_foreign_state() -> None:
    store = HashStore()
    store.set(RoundKeys("run").of(0, "first"), "hello")
    with pytest.raises(RendezvousStateError, match=r"holds b'hello', not a rendezvous identity"):
        _protocol(store, rank=0).join()


def test_a_verdict_that_is_not_json_is_reported_as_foreign_state() -> None:
    store = HashStore()
    store.set(RoundKeys("run").of(0, "done"), "{broken")
    with pytest.raises(RendezvousStateError, match=r"not a rendezvous verdict"):
        _protocol(store, rank=1).join()


def test_run_ids_are_quoted_so_that_no_run_id_reaches_into_another_runs_keys() -> None:
    assert RoundKeys("a/round/0").claim(0, 1) != RoundKeys("a").claim(0, 1)
    assert RoundKeys("a/round/0").prefix == "__rdzv__/a%2Fround%2F0"


@pytest.mark.parametrize(
    ("ranks", "text"),
    [([], "none"), ([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2, 5, 7-8"), ([1, 3], "1, 3")],
)
def test_rank_lists_are_written_as_ranges(ranks: list[int], text: str) -> None:
    assert format_ranks(ranks) == text


def test_a_failed_host_lingers_until_its_members_read_the_verdict_and_no_longer() -> None:
    keys = RoundKeys("run")
    store = HashStore()
    for rank in (0, 1):
        store.set(keys.claim(0, rank), _identity(rank).raw)
    store.set(keys.of(0, "ack/0"), "1")
    collector = EventCollector()
    logger = logging.getLogger("rdzv.rendezvous")
    logger.addHandler(collector)
    logger.setLevel(logging.INFO)
    try:
        _protocol(store, rank=0).linger(0.05)  # rank 1 never reads it: bounded, no raise
        assert [e["event"] for e in collector.events] == ["linger_ended"]
        store.set(keys.of(0, "ack/1"), "1")
        _protocol(store, rank=0).linger(5.0)  # every member read it: returns at once
        assert len(collector.events) == 1
    finally:
        logger.removeHandler(collector)
        logger.setLevel(logging.NOTSET)


class _AbortedWhileConfirming(HashStore):
    """Rank 1 was counted but never confirms; while the completing node looks for the
    confirmations, another node aborts the round."""

    def check(self, keys: Any) -> bool:
        done = RoundKeys("run").of(0, "done")
        found = super().check(keys)
        if not found and len(keys) > 1 and not super().check([done]):
            verdict = {
                "status": "aborted",
                "reason": "duplicate_rank",
                "message": "duplicate rank 1 in round 0",
                "by": _identity(1).as_dict(),
                "at": 1.0,
            }
            self.set(done, json.dumps(verdict))
        return found


def test_the_completing_node_acts_on_another_verdict_while_it_waits_for_confirmations() -> None:
    store = _AbortedWhileConfirming()
    keys = RoundKeys("run")
    store.set(keys.claim(0, 1), _identity(1).raw)
    store.add(keys.of(0, "count"), 1)  # rank 1 counted, not confirmed: rank 0 completes

    with pytest.raises(RendezvousStateError, match=r"^duplicate rank 1 in round 0 \[reported by"):
        _protocol(store, rank=0).join()


def test_a_rank_claimed_by_a_node_of_another_world_size_is_reported_as_a_mismatch() -> None:
    # A node of the wrong world size claims its rank in the write that reads ``first``
    # (one round trip), then rejects the round; a node that finds its rank held by it says
    # what is wrong: the world sizes, not a duplicate rank.
    store = HashStore()
    keys = RoundKeys("run")
    store.set(keys.of(0, "first"), _identity(0).raw)
    stranger = Identity("elsewhere", 77, 1, 3, "token77")
    store.set(keys.claim(0, 1), stranger.raw)
    with pytest.raises(RendezvousStateError, match=r"world size mismatch .* claimed its rank"):
        _protocol(store, rank=1).join()
    verdict = json.loads(store.get(keys.of(0, "done")))
    assert (verdict["status"], verdict["reason"]) == ("aborted", "world_size_mismatch")


class _PipelinedHashStore(HashStore):
    """A store with rdzv's ``compare_sets`` (each item in order), as rdzv's TCPStore has."""

    def compare_sets(self, items: list[tuple[str, str | bytes, str | bytes]]) -> list[bytes]:
        return [self.compare_set(key, old, new) for key, old, new in items]


@pytest.mark.parametrize("pipelined", [True, False], ids=["compare_sets", "one_by_one"])
def test_a_node_of_another_world_size_acknowledges_the_verdict_only_if_it_claimed_its_rank(
    pipelined: bool,
) -> None:
    # With compare_sets the node claims its rank in the write that reads ``first``, so the
    # hosting node's linger waits for its ack: it must give one (it wrote the verdict). One
    # by one it rejects before claiming: no claim, and no ack that could stand for another.
    store = _PipelinedHashStore() if pipelined else HashStore()
    keys = RoundKeys("run")
    store.set(keys.of(0, "first"), _identity(0).raw)
    with pytest.raises(RendezvousStateError, match=r"world size mismatch"):
        _protocol(store, rank=1, world_size=3).join()
    assert store.check([keys.claim(0, 1)]) is pipelined
    assert store.check([keys.of(0, "ack/1")]) is pipelined
