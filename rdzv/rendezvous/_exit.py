"""The exit barriers: the hosting node keeps the store up until the others are done with it.

* :func:`wait_for_readers`: after a complete round, until every member read the verdict;
* :func:`linger`: after a failed round, best effort, until every member that claimed a rank
  read the verdict (and briefly for ranks that have not arrived yet; after a member was
  lost, ``shutdown()`` waits for them until the round's join deadline);
* :func:`leave`: in ``shutdown()``, until every other rank has left.

A member acknowledges the verdict (``ack/<rank>``) and, in ``shutdown()``, its leaving
(``exit/<rank>``); see :mod:`rdzv.rendezvous._round_state` for the keys.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousStateError,
    RendezvousTimeoutError,
    StoreError,
    StoreTimeoutError,
)
from rdzv.events import INFO, WARNING
from rdzv.rendezvous._round_failures import unread_message
from rdzv.rendezvous._round_state import Identity, RoundKeys, decode_verdict, name_ranks
from rdzv.rendezvous._static_config import StaticConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.rendezvous._round_io import RoundIO
    from rdzv.store.base import Store

__all__ = ["ARRIVAL_GRACE", "leave", "linger", "wait_for_readers"]

#: How long a failed round's host waits for ranks that have not arrived at all.
ARRIVAL_GRACE: Final = 1.0
_ARRIVAL_POLL: Final = 0.05

_MIN_WAIT: Final = 0.05


def _msg(*parts: str) -> str:
    return " ".join(parts)


def wait_for_readers(io: RoundIO, timeout: float) -> None:
    """Exit barrier of the hosting node whose round completed: return once every node read
    the verdict (acknowledged it), within ``timeout`` seconds.

    Raises:
        RendezvousTimeoutError: some ranks did not read it within ``timeout`` seconds (the
            message names them).
        RendezvousConnectionError: the store connection failed.
    """
    acks = [io.keys.of(io.round, f"ack/{rank}") for rank in range(io.me.world_size)]
    try:
        io.store.wait(acks, timeout)
    except StoreTimeoutError:
        missing = [r for r, key in enumerate(acks) if not io.call(io.store.check, [key])]
        io.fail(RendezvousTimeoutError(unread_message(io.where, missing, timeout)))
    except StoreError as exc:
        io.raise_store(exc, "waiting for every node to read the result")


def linger(
    store: Store,
    keys: RoundKeys,
    round_index: int,
    world_size: int,
    timeout: float,
    clock: Callable[[], float],
    arrivals_until: float | None = None,
) -> str | None:
    """Exit barrier of a hosting node whose round failed: best effort, bounded.

    Waits up to ``timeout`` seconds until every member that claimed a rank has read the
    verdict, so the failure reaches them before the hosting node (and its store) goes away;
    a node that claims while this waits is waited for too. A member that reported losing
    its store connection, or that vanished (reason ``member_lost``), is not waited for (it
    cannot ack), unless a new process took its claim over. Ranks that have not claimed
    yet get a short grace (:data:`ARRIVAL_GRACE`), or until the ``clock`` time
    ``arrivals_until`` when given: a node that starts after a fast failure then learns the
    round's verdict instead of finding no store.

    Returns:
        None once every member read the verdict; else why the wait ended (a store error,
        the timeout included). Never raises a store error: the caller is already raising
        the round's error.
    """
    start = clock()
    end = start + timeout
    grace_end = start + min(timeout, ARRIVAL_GRACE) if arrivals_until is None else arrivals_until
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
    """The verdict's reason, and the member that cannot read it: its author when the reason
    is ``connection_lost``, the vanished member when it is ``member_lost``."""
    if not store.check([done]):
        return None, None
    try:
        verdict = decode_verdict(store.get(done), done)
        reason = verdict.get("reason")
        lost = {"connection_lost": "by", "member_lost": "lost"}.get(str(reason))
        gone = Identity(**verdict[lost]) if lost is not None else None
    except (RendezvousStateError, KeyError, TypeError):  # foreign data: wait for every member
        return None, None
    return gone, None if reason is None else str(reason)


Report = Callable[..., None]
"""``report(event, level, **fields)``: how :func:`leave` says what it waits for."""


def leave(
    store: Store, cfg: StaticConfig, keys: RoundKeys, round_index: int, report: Report
) -> int | None:
    """The ``shutdown()`` exit barrier of round ``round_index`` (the last one joined).

    A node that does not host the store records that its rank is leaving; the hosting node
    waits (up to ``read_timeout``) until every other rank has. Before waiting it reports
    ``exit_wait`` (INFO: ``waiting_for`` ranks, ``timeout``); when it gives up,
    ``exit_wait_ended`` (WARNING: ``missing`` ranks), each with a ``message`` in words.

    Returns:
        How many other nodes left (hosting node), or None (other nodes).

    Raises:
        RendezvousConnectionError: the store could not be reached.
    """
    timeout = cfg.read_timeout.total_seconds()
    try:
        if not cfg.start_daemon:  # its own key only: O(1), not O(world size), per member
            store.add(keys.of(round_index, f"exit/{cfg.rank}"), 1)  # answered: the host
            return None  # has it before we close
        others = [rank for rank in range(cfg.world_size) if rank != cfg.rank]
        exits = {rank: keys.of(round_index, f"exit/{rank}") for rank in others}
        if not others:
            return 0
        report(
            "exit_wait",
            INFO,
            waiting_for=others,
            timeout=timeout,
            message=_msg(
                f"waiting up to {timeout:g} s (read_timeout) for {name_ranks(others)} to call",
                "shutdown() before stopping the rendezvous store",
            ),
        )
        try:
            store.wait([exits[rank] for rank in others], cfg.read_timeout)
        except StoreTimeoutError:
            missing = [rank for rank in others if not store.check([exits[rank]])]
            report(
                "exit_wait_ended",
                WARNING,
                missing=missing,
                timeout=timeout,
                message=_msg(
                    f"{name_ranks(missing)} did not call shutdown() within {timeout:g} s",
                    "(read_timeout); stopping the rendezvous store anyway",
                ),
            )
            return len(others) - len(missing)
        return len(others)
    except StoreError as exc:
        raise RendezvousConnectionError(
            _msg(
                f"rank {cfg.rank} could not leave the rendezvous of run '{cfg.run_id}' at",
                f"{cfg.endpoint} cleanly: {exc}",
            )
        ) from exc
