"""The exit barriers: the hosting node keeps the store up until the others are done with it.

* :func:`wait_for_readers`: after a complete round, until every member read the verdict;
* :func:`linger`: after a failed round, best effort, until every member that claimed a rank
  read the verdict (and briefly for ranks that have not arrived yet; after a member was
  lost, ``shutdown()`` waits for them until the round's join deadline);
* :func:`leave`: in ``shutdown()``, until every other rank has left.

A member acknowledges the verdict (``ack/<rank>``) and, in ``shutdown()``, its leaving
(``exit/<rank>``); see :mod:`rdzv.rendezvous._round_state` for the keys. After a complete
round, a member that is gone (its store connection closed, or its process died; seen by
:mod:`rdzv.rendezvous._departures`) is not waited for, and one alive but silent only for
:data:`~rdzv.rendezvous._departures.QUIET_SECONDS` past the last member heard of: neither
undoes the round, and neither holds the others for ``read_timeout``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousStateError,
    StoreError,
    StoreTimeoutError,
)
from rdzv.events import INFO, WARNING
from rdzv.rendezvous._departures import QUIET_SECONDS, Departures, Waited
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


def wait_for_readers(io: RoundIO, timeout: float, departures: Departures | None = None) -> None:
    """Exit barrier of the hosting node whose round completed: return once every other
    member read the verdict (acknowledged it) or is gone (its store connection closed, or
    its process died: it cannot read it, invariant 1 of :mod:`rdzv.rendezvous._departures`),
    or once none did for :data:`QUIET_SECONDS`, within ``timeout`` seconds at most.

    The round completed: the world is decided, and a member that did not confirm does not
    undo it (failing here would stop the store under every member that did). Those that did
    not are reported (event ``read_wait_ended``, WARNING: ``gone``, ``missing``, ``message``).

    Raises:
        RendezvousConnectionError: this node's store connection failed (only without
            ``departures``, which need no store).
    """
    others = [rank for rank in range(io.me.world_size) if rank != io.me.rank]
    quiet = min(QUIET_SECONDS, timeout)
    if departures is not None:
        waited = departures.wait(io.round, "ack", others, timeout, quiet)
    else:
        acks = {rank: io.keys.of(io.round, f"ack/{rank}") for rank in others}
        try:
            waited = _store_wait(io.store, acks, timeout, quiet, io.clock)
        except StoreError as exc:
            io.raise_store(exc, "waiting for every node to read the result")
    if waited.gone or waited.missing:
        message = unconfirmed_message(io.where, waited, timeout, quiet)
        io.event(
            "read_wait_ended", WARNING, gone=waited.gone, missing=waited.missing, message=message
        )


def _store_wait(
    store: Store, keys: dict[int, str], limit: float, quiet: float, clock: Callable[[], float]
) -> Waited:
    """Wait until every key of ``keys`` (rank -> key) exists in ``store``, or none came
    for ``quiet`` seconds, or ``limit`` seconds passed: an exit barrier over a store that
    this node does not host in-process (nobody sees a member's connection close).

    Raises:
        StoreError: any but a timeout.
    """
    start = clock()
    end, heard = start + limit, start
    ranks = list(keys)
    for i, rank in enumerate(ranks):  # one at a time: when each came is when it is heard of
        bound = min(end, heard + quiet) - clock()
        with contextlib.suppress(StoreTimeoutError):
            if bound > 0 or store.check([keys[rank]]):
                store.wait([keys[rank]], max(bound, _MIN_WAIT))
                heard = clock()
                continue
        missing = [r for r in ranks[i:] if not store.check([keys[r]])]
        if missing:
            ended_by = "limit" if clock() >= end else "quiet"
            done = [r for r in ranks if r not in missing]
            return Waited(done, [], missing, ended_by, clock() - start)
        break
    return Waited(ranks, [], [], None, clock() - start)


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
    store: Store,
    cfg: StaticConfig,
    keys: RoundKeys,
    round_index: int,
    report: Report,
    departures: Departures | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int | None:
    """The ``shutdown()`` exit barrier of round ``round_index`` (the last one joined).

    A node that does not host the store records that its rank is leaving; the hosting node
    waits until every other rank has, or is gone (its store connection closed, or its
    process died: with ``departures``, invariant 1 of :mod:`rdzv.rendezvous._departures`),
    or until none did for :data:`QUIET_SECONDS` (a member alive but silent), within
    ``read_timeout`` at most. Before waiting it reports ``exit_wait`` (INFO:
    ``waiting_for`` ranks, ``timeout``, ``quiet``); when some rank did not call
    ``shutdown()``, ``exit_wait_ended`` (WARNING: ``gone`` and ``missing`` ranks), each
    with a ``message`` in words.

    Returns:
        How many other nodes left, gone ones included (hosting node), or None (other nodes).

    Raises:
        RendezvousConnectionError: the store could not be reached.
    """
    timeout = cfg.read_timeout.total_seconds()
    quiet = min(QUIET_SECONDS, timeout)
    try:
        if not cfg.start_daemon:  # its own key only: O(1), not O(world size), per member
            store.add(keys.of(round_index, f"exit/{cfg.rank}"), 1)  # answered: the host
            return None  # has it before we close
        others = [rank for rank in range(cfg.world_size) if rank != cfg.rank]
        if not others:
            return 0
        report(
            "exit_wait",
            INFO,
            waiting_for=others,
            timeout=timeout,
            quiet=quiet,
            message=_msg(
                f"waiting for {name_ranks(others)} to call shutdown() before stopping the",
                f"rendezvous store (not for a node whose connection closes; up to {quiet:g} s",
                f"while none does, {timeout:g} s (read_timeout) at most)",
            ),
        )
        if departures is not None:
            waited = departures.wait(round_index, "exit", others, timeout, quiet)
        else:
            exits = {rank: keys.of(round_index, f"exit/{rank}") for rank in others}
            waited = _store_wait(store, exits, timeout, quiet, clock)
        if waited.gone or waited.missing:
            report(
                "exit_wait_ended",
                WARNING,
                gone=waited.gone,
                missing=waited.missing,
                timeout=timeout,
                message=not_left_message(waited, timeout, quiet),
            )
        return len(others) - len(waited.missing)
    except StoreError as exc:
        raise RendezvousConnectionError(
            _msg(
                f"rank {cfg.rank} could not leave the rendezvous of run '{cfg.run_id}' at",
                f"{cfg.endpoint} cleanly: {exc}",
            )
        ) from exc


def _why_missing(waited: Waited, timeout: float, quiet: float) -> str:
    """Why the wait for ``waited.missing`` ended."""
    if waited.ended_by == "quiet":
        them = "it" if len(waited.missing) == 1 else "them"
        return f"nothing was heard from {them} for {quiet:g} s"
    return f"not within {timeout:g} s (read_timeout)"


_GONE: Final = "(its connection to the store closed, or its process ended)"


def unconfirmed_message(where: str, waited: Waited, timeout: float, quiet: float) -> str:
    """The hosting node of the completed round ``where`` stopped waiting for some members
    to read the result (``waited``)."""
    parts = []
    if waited.gone:
        parts.append(
            f"{name_ranks(waited.gone)} left without confirming it read the result {_GONE}"
        )
    if waited.missing:
        why = _why_missing(waited, timeout, quiet)
        parts.append(f"{name_ranks(waited.missing)} did not confirm reading it: {why}")
    return f"{where} completed, but {', and '.join(parts)}; this node keeps the world it got."


def not_left_message(waited: Waited, timeout: float, quiet: float) -> str:
    """The hosting node stopped waiting for some members to call ``shutdown()``."""
    parts = []
    if waited.gone:
        parts.append(f"{name_ranks(waited.gone)} left without calling shutdown() {_GONE}")
    if waited.missing:
        why = _why_missing(waited, timeout, quiet)
        parts.append(f"{name_ranks(waited.missing)} did not call shutdown(): {why}")
    stopping = "stopping the rendezvous store" + (" anyway" if waited.missing else "")
    return f"{'; '.join(parts)}; {stopping}"
