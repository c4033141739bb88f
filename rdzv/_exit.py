"""Connections of a static rendezvous around the join: a fresh one, leaving, closing.

``reconnect`` opens a second connection to the store (a member that lost its own reports
that over it, see :mod:`rdzv._join`); ``linger`` is the exit barrier of a hosting node whose
round failed; ``leave`` is the ``shutdown()`` exit barrier; ``close_store`` releases a
connection (and a hosted server).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from rdzv._round_state import Identity, RoundKeys, decode_verdict
from rdzv._static_config import StaticConfig
from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousStateError,
    StoreConnectionError,
    StoreError,
    StoreTimeoutError,
)

if TYPE_CHECKING:
    from rdzv.store import Store

__all__ = ["ARRIVAL_GRACE", "close_store", "leave", "linger", "reconnect"]

#: How long a failed round's host waits for ranks that have not arrived at all.
ARRIVAL_GRACE: Final = 1.0
_ARRIVAL_POLL: Final = 0.05

_MIN_WAIT: Final = 0.05


def _msg(*parts: str) -> str:
    return " ".join(parts)


def reconnect(store: Store, seconds: float) -> Store:
    """A fresh connection to ``store``'s server; connecting and each operation within
    ``seconds``.

    Raises:
        StoreError: no connection could be made in time, or ``store`` cannot open another.
    """
    clone = getattr(store, "clone", None)
    if not callable(clone):
        raise StoreConnectionError(f"{store!r} cannot open a second connection")
    store.set_timeout(seconds)  # a clone inherits it (connect timeout included)
    fresh: Store = clone()
    return fresh


def linger(
    store: Store,
    keys: RoundKeys,
    round_index: int,
    world_size: int,
    timeout: float,
    clock: Callable[[], float],
) -> str | None:
    """Exit barrier of a hosting node whose round failed: best effort, bounded.

    Waits up to ``timeout`` seconds until every member that claimed a rank has read the
    verdict, so the failure reaches them before the hosting node (and its store) goes away;
    a node that claims while this waits is waited for too. A member that reported losing
    its store connection is not waited for (it cannot ack). Ranks that have not claimed
    yet get a short grace (:data:`ARRIVAL_GRACE`): a node that starts a moment after a fast
    failure then learns the round's verdict instead of finding no store.

    Returns:
        None once every member read the verdict; else why the wait ended (a store error,
        the timeout included). Never raises a store error: the caller is already raising
        the round's error.
    """
    start = clock()
    end = start + timeout
    grace_end = start + min(timeout, ARRIVAL_GRACE)
    claims = [keys.claim(round_index, r) for r in range(world_size)]
    try:
        store.set_timeout(timeout)
        lost, reason = _verdict_facts(store, keys.of(round_index, "done"))
        if reason == "timeout":
            grace_end = start  # at the deadline, a node that has not arrived is too late

        waited_for: list[int] = []
        while True:  # claims only grow: at most world_size + 1 passes
            members = [r for r, key in enumerate(claims) if store.check([key])]
            if members == waited_for:
                missing = [key for key in claims if key not in {claims[r] for r in members}]
                if not missing or clock() >= grace_end:
                    return None  # they all read it, and nobody claimed meanwhile
                with contextlib.suppress(StoreTimeoutError):  # poll for a late claim
                    store.wait(missing[:1], max(min(_ARRIVAL_POLL, grace_end - clock()), 0.0))
                continue
            waited_for = members
            if lost is not None and lost.rank in members:
                holder = store.get(claims[lost.rank])
                members = [r for r in members if r != lost.rank or holder != lost.raw]
            acks = [keys.of(round_index, f"ack/{r}") for r in members]
            store.wait(acks, max(end - clock(), _MIN_WAIT))
    except StoreError as exc:
        return f"{type(exc).__name__}: {exc}"


def _verdict_facts(store: Store, done: str) -> tuple[Identity | None, str | None]:
    """The verdict's reason, and its author when the reason is ``connection_lost``."""
    if not store.check([done]):
        return None, None
    try:
        verdict = decode_verdict(store.get(done), done)
    except RendezvousStateError:  # foreign data: wait for every member
        return None, None
    reason = verdict.get("reason")
    by = Identity(**verdict["by"]) if reason == "connection_lost" else None
    return by, None if reason is None else str(reason)


def close_store(store: Store) -> None:
    """Close ``store``'s connection (and server) if it has any; never raises a store error."""
    close = getattr(store, "close", None)
    if callable(close):
        with contextlib.suppress(StoreError, OSError):
            close()


def leave(store: Store, cfg: StaticConfig, keys: RoundKeys, round_index: int) -> int | None:
    """The ``shutdown()`` exit barrier of round ``round_index`` (the last one joined).

    A node that does not host the store counts itself out; the hosting node waits (up to
    ``read_timeout``) until every other member has.

    Returns:
        How many other nodes left (hosting node), or None (other nodes).

    Raises:
        RendezvousConnectionError: the store could not be reached.
    """
    count = keys.of(round_index, "exit")
    everyone = keys.of(round_index, "exit_all")
    others = cfg.world_size - 1
    try:
        if not cfg.start_daemon:
            if store.add(count, 1) == others:
                store.set(everyone, b"1")
            return None
        if others == 0:
            return 0
        try:
            store.wait([everyone], cfg.read_timeout)
        except StoreTimeoutError:
            return store.add(count, 0)
        return others
    except StoreError as exc:
        raise RendezvousConnectionError(
            _msg(
                f"rank {cfg.rank} could not leave the rendezvous of run '{cfg.run_id}' at",
                f"{cfg.endpoint} cleanly: {exc}",
            )
        ) from exc
