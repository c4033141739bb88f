"""A claim made by a handler of this very process: alive while that handler is.

Several handlers may share one process (several simulated nodes per process, or a
rendezvous restarted in process): the kernel cannot tell them apart, so the takeover of a
dead claimant (rdzv.rendezvous._join, invariant 6) asks the process-wide registry of live
handler tokens instead. These tests drive the join protocol over an in-memory store with the
real liveness check, and the registry through real handlers.

Invariants of :mod:`rdzv.rendezvous._join` covered: 6 (whether a claimant of this very
process is alive).
"""

from __future__ import annotations

import gc
import itertools
import json
import os

import pytest
from round_config import round_cfg

from rdzv.errors import RendezvousStateError
from rdzv.rendezvous import _liveness
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._liveness import claimant_alive, handler_ended, live_handlers
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.base import HashStore

KEYS = RoundKeys("run")


def _cfg(rank: int, world_size: int) -> StaticConfig:
    return round_cfg(rank, world_size)


def _protocol(store: HashStore, me: Identity) -> RoundProtocol:
    ticks = itertools.count()
    return RoundProtocol(
        store,
        _cfg(me.rank, me.world_size),
        me,
        0,
        5.0,
        clock=lambda: next(ticks) * 0.001,
        wall=lambda: 1.0,
    )  # the real liveness check: claimant_alive


def _handler(rank: int) -> StaticTCPRendezvous:
    return StaticTCPRendezvous("127.0.0.1", 29400, rank, 2, "run", 5)


def _claimed_by(store: HashStore, holder: Identity) -> None:
    """What ``holder`` left in the store when it joined round 0 of a 2-node world."""
    store.compare_set(KEYS.of(0, "first"), "", holder.raw)
    store.set(KEYS.claim(0, holder.rank), holder.raw)
    store.add(KEYS.of(0, "count"), 1)
    store.set(KEYS.confirmed(0, holder.rank), holder.raw)


def test_a_claim_of_a_live_handler_of_this_process_is_a_duplicate_rank() -> None:
    first = _handler(1)
    store = HashStore()
    _claimed_by(store, Identity.local(0, 2))
    _claimed_by(store, first._node.me)

    with pytest.raises(RendezvousStateError, match=r"duplicate rank 1"):
        _protocol(store, Identity.local(1, 2)).join()
    assert store.get(KEYS.claim(0, 1)) == first._node.me.raw


@pytest.mark.parametrize("how", ["declared dead", "shut down", "collected"])
def test_a_claim_of_a_handler_of_this_process_that_is_gone_is_taken_over(how: str) -> None:
    first = _handler(1)
    old = first._node.me
    store = HashStore()
    _claimed_by(store, Identity.local(0, 2))
    _claimed_by(store, old)
    assert old.pid == os.getpid() and claimant_alive(old.pid, old.token)
    if how == "declared dead":
        first.declare_dead()
    elif how == "shut down":
        first.shutdown()  # never connected: nothing to leave, the registry only
    else:
        del first
        gc.collect()
    me = Identity.local(1, 2)

    protocol = _protocol(store, me)
    protocol.join()

    assert not claimant_alive(old.pid, old.token)
    assert protocol.took_over == old
    assert store.get(KEYS.claim(0, 1)) == me.raw
    assert json.loads(store.get(KEYS.of(0, "done")))["status"] == "complete"


def test_handlers_enter_the_registry_when_made_and_leave_it_once() -> None:
    handler = _handler(1)
    token = handler._node.me.token
    assert token in live_handlers()
    handler.declare_dead()
    assert token not in live_handlers()
    handler.declare_dead()  # idempotent, and so is shutdown() after it
    handler.shutdown()
    handler_ended(token)
    assert token not in live_handlers()


def test_another_process_is_still_probed_through_the_kernel() -> None:
    # a token is only meaningful for this process's own pid: pid 1 is alive whatever it says
    assert claimant_alive(1, "no-such-token")


def test_handlers_collected_without_shutdown_leave_a_bounded_registry() -> None:
    kept = [_handler(1) for _ in range(3)]
    for _ in range(10):
        batch = [_handler(1) for _ in range(100)]  # dropped without shutdown()
        del batch
        gc.collect()
    assert len(_liveness._REGISTRY.live) <= 2 * 100 + _liveness._SWEEP_FROM
    assert {h._node.me.token for h in kept} <= live_handlers()
    fresh = _handler(1)
    assert fresh._node.me.token in live_handlers()
    assert len(live_handlers()) < 110  # only handlers not collected yet count as alive
    for handler in (*kept, fresh):
        handler.shutdown()
