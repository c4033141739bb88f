"""How a round that cannot complete is reported: claimed-but-unconfirmed ranks, and a member
that lost its store connection telling the others at once (in process, in-memory store).

Invariants of :mod:`rdzv.rendezvous._join` covered: 7 (a member that loses its connection
mid-join tells the others at once) and 11 (a timeout tells claimed-but-unconfirmed ranks
from ranks never seen).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousTimeoutError,
    StoreClosedError,
    StoreConnectionError,
)
from rdzv.events import EventCollector
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.base import HashStore, Store

KEYS = RoundKeys("run")


def _identity(rank: int, world_size: int = 3) -> Identity:
    return Identity("host", 1000 + rank, rank, world_size, f"token{rank}")


def _protocol(
    store: Any,
    rank: int,
    deadline: float = 5.0,
    reconnect: Callable[[float], Store] | None = None,
) -> RoundProtocol:
    ticks = itertools.count()
    cfg = StaticConfig(
        host="127.0.0.1",
        port=29400,
        rank=rank,
        world_size=3,
        run_id="run",
        join_timeout=timedelta(seconds=3),
        read_timeout=timedelta(seconds=3),
        start_daemon=rank == 0,
    )
    return RoundProtocol(
        store,
        cfg,
        _identity(rank),
        0,
        deadline,
        clock=lambda: next(ticks) * 0.001,
        wall=lambda: 1.0,
        reconnect=reconnect,
    )


class _ResetsTheCountAdd(HashStore):
    """A connection that breaks when its node sends the ADD on the round's count key."""

    def add(self, key: str, amount: int) -> int:
        if key == KEYS.of(0, "count"):
            raise StoreClosedError("the store at 127.0.0.1:29400 closed the connection during ADD")
        return super().add(key, amount)


class _SameData(HashStore):
    """A second "connection" to the data of ``store`` (what a fresh TCP connection sees)."""

    def __init__(self, store: HashStore) -> None:
        super().__init__()
        self._kv, self._cond = store._kv, store._cond
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_timeout_tells_ranks_that_claimed_but_never_confirmed_from_ranks_never_seen() -> None:
    store = HashStore()
    store.set(KEYS.claim(0, 1), _identity(1).raw)  # rank 1 claimed, then never counted

    with pytest.raises(RendezvousTimeoutError) as caught:
        _protocol(store, rank=0, deadline=0.0).join()
    assert str(caught.value).startswith("rendezvous round 0 of run 'run' at 127.0.0.1:29400")
    unconfirmed = " ".join(
        [
            "1 of 3 nodes joined; missing ranks: 1-2. Rank 1 claimed its place but never",
            "confirmed (it may have lost its store connection or died while joining). Start",
        ]
    )
    assert unconfirmed in str(caught.value)


def test_a_member_that_loses_its_connection_mid_join_makes_the_others_fail_at_once(
    events: EventCollector,
) -> None:
    store = _ResetsTheCountAdd()
    fresh: list[_SameData] = []

    def reconnect(seconds: float) -> Store:
        assert 0 < seconds <= 1.0  # bounded: a short, best-effort attempt
        fresh.append(_SameData(store))
        return fresh[-1]

    with pytest.raises(RendezvousConnectionError, match=r"lost the rendezvous store .* add"):
        _protocol(store, rank=1, reconnect=reconnect).join()
    assert [f.closed for f in fresh] == [True]
    verdict = json.loads(store.get(KEYS.of(0, "done")))
    assert (verdict["status"], verdict["reason"]) == ("aborted", "connection_lost")
    assert "failure_published" in [e["event"] for e in events.events]

    lost = r"rank 1 \(host pid 1001\) lost its connection to the rendezvous store while calling add"
    with pytest.raises(
        RendezvousConnectionError, match=rf"failed: {lost}: .*during ADD.* \[reported by rank 1 "
    ):
        _protocol(_SameData(store), rank=2).join()  # a member still waiting: fails at once


def test_a_member_that_cannot_reach_the_store_again_still_raises_its_own_error(
    events: EventCollector,
) -> None:
    store = _ResetsTheCountAdd()

    def reconnect(seconds: float) -> Store:
        raise StoreConnectionError("no rendezvous server answered at 127.0.0.1:29400")

    with pytest.raises(RendezvousConnectionError, match=r"lost the rendezvous store .* add"):
        _protocol(store, rank=1, reconnect=reconnect).join()
    assert not store.check([KEYS.of(0, "done")])  # nothing published: the others time out
    failures = [e for e in events.events if e["event"] == "failure_not_published"]
    assert [e["error"] for e in failures] == [
        "StoreConnectionError: no rendezvous server answered at 127.0.0.1:29400"
    ]


def test_the_host_does_not_wait_for_a_member_that_reported_losing_its_connection(
    events: EventCollector,
) -> None:
    store = _ResetsTheCountAdd()
    for rank in (0, 1, 2):
        store.set(KEYS.claim(0, rank), _identity(rank).raw)
    with pytest.raises(RendezvousConnectionError):
        _protocol(store, rank=1, reconnect=lambda seconds: _SameData(store)).join()
    for rank in (0, 2):
        store.set(KEYS.of(0, f"ack/{rank}"), "1")

    host = _protocol(_SameData(store), rank=0)
    host.linger(0.05)  # rank 1 never acks, but it wrote the verdict: no wait
    assert "linger_ended" not in [e["event"] for e in events.events]

    store.set(KEYS.claim(0, 1), Identity("host", 1500, 1, 3, "other").raw)  # it was a duplicate
    host.linger(0.05)  # then the real holder of rank 1 must read the verdict: waited for
    assert "linger_ended" in [e["event"] for e in events.events]


class _ClaimsDuringTheFirstWait(HashStore):
    """Rank 2 claims its place while the host waits for the members it knew of."""

    def wait(self, keys: Any, timeout: Any = None) -> None:
        if not self.check([KEYS.claim(0, 2)]):
            self.set(KEYS.claim(0, 2), _identity(2).raw)
        super().wait(keys, timeout)


def test_the_host_also_waits_for_a_node_that_claims_while_it_lingers(
    events: EventCollector,
) -> None:
    store = _ClaimsDuringTheFirstWait()
    for rank in (0, 1):
        store.set(KEYS.claim(0, rank), _identity(rank).raw)
        store.set(KEYS.of(0, f"ack/{rank}"), "1")

    _protocol(store, rank=0).linger(0.05)  # rank 2 never reads the verdict: bounded wait
    assert [e["event"] for e in events.events] == ["linger_ended"]
    store.set(KEYS.of(0, "ack/2"), "1")
    _protocol(store, rank=0).linger(5.0)  # now every member, rank 2 included, read it
    assert len(events.events) == 1
