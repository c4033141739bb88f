"""How a round of the static rendezvous fails: the errors and messages users see (pure).

Builds the text of a timeout diagnosis, of a lost store connection, and translates store
failures (at connect time and mid-round) into the rendezvous error classes. No I/O: the
callers (:mod:`rdzv._join`, :mod:`rdzv.static`) gather the facts and raise.
"""

from __future__ import annotations

import errno as errno_names

from rdzv._round_state import Identity, format_ranks
from rdzv._static_config import StaticConfig
from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousError,
    RendezvousTimeoutError,
    StoreBindError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)

__all__ = [
    "closed_message",
    "connect_error",
    "duplicate_message",
    "lost_connection_message",
    "mismatch_message",
    "stale_message",
    "store_failure",
    "timeout_message",
    "unread_message",
]


def _msg(*parts: str) -> str:
    return " ".join(parts)


def timeout_message(
    cfg: StaticConfig, where: str, waited: float, confirmed: list[int], claimed: list[int]
) -> str:
    """The diagnosis of a round whose deadline passed.

    Args:
        cfg: the settings of the node that reports.
        where: "round k of run 'x' at host:port".
        waited: seconds the reporting node waited.
        confirmed: ranks that claimed their place and were counted (they joined).
        claimed: ranks that claimed their place but never confirmed (never counted).
    """
    missing = [rank for rank in range(cfg.world_size) if rank not in confirmed]
    parts = [
        f"rendezvous {where} timed out after {waited:.1f} s:",
        f"{len(confirmed)} of {cfg.world_size} nodes joined; missing ranks:",
        f"{format_ranks(missing)}.",
    ]
    if claimed:
        one = len(claimed) == 1
        parts += [
            f"{'Rank' if one else 'Ranks'} {format_ranks(claimed)}",
            f"claimed {'its place' if one else 'their places'} but never confirmed",
            f"({'it' if one else 'they'} may have lost {'its' if one else 'their'} store",
            "connection or died while joining).",
        ]
    parts += [
        "Start the missing nodes, check their logs, or raise the join timeout",
        f"({cfg.join_timeout.total_seconds():g} s).",
    ]
    return _msg(*parts)


def lost_connection_message(where: str, me: Identity, doing: str, exc: StoreError) -> str:
    """What a node that lost its store connection mid-join tells the others (its verdict)."""
    return _msg(
        f"rendezvous {where} failed: {me.describe()} lost its connection to the rendezvous",
        f"store while {doing}: {exc}. The round cannot complete without that node; check",
        "its log and its network, then restart the round.",
    )


def store_failure(
    exc: StoreError, endpoint: str, where: str, doing: str, waited: float
) -> RendezvousError:
    """Translate a store failure mid-round into the rendezvous error users see.

    Returns:
        ``RendezvousTimeoutError`` when the store did not answer in time;
        ``RendezvousConnectionError`` otherwise (the connection broke, or the peer is not a
        rendezvous store).
    """
    if isinstance(exc, StoreTimeoutError):
        what = f"the rendezvous store at {endpoint} did not answer in time"
        return RendezvousTimeoutError(
            _msg(f"{what} while {doing} in {where}, after {waited:.1f} s: {exc}")
        )
    if isinstance(exc, StoreProtocolError):
        what = f"the peer at {endpoint} is not a rendezvous store"
    else:
        what = f"lost the rendezvous store at {endpoint} (hosted by rank 0)"
    return RendezvousConnectionError(
        _msg(f"{what} while {doing} in {where}, after {waited:.1f} s: {exc}")
    )


def connect_error(cfg: StaticConfig, exc: StoreError, waited: float) -> RendezvousError:
    """Translate a failure to create the store into the rendezvous error users see."""
    timeout = f"{cfg.join_timeout.total_seconds():g} s"
    if isinstance(exc, StoreBindError):
        detail = str(exc)
        if exc.errno is not None and f"errno {exc.errno}" not in detail:
            name = errno_names.errorcode.get(exc.errno, "unknown")
            detail = f"{detail} (errno {exc.errno} {name})"
        return RendezvousConnectionError(
            f"rank {cfg.rank} could not host the rendezvous store at {cfg.endpoint}: {detail}"
        )
    if isinstance(exc, StoreTimeoutError):
        return RendezvousTimeoutError(
            _msg(
                f"rank {cfg.rank}: the rendezvous store at {cfg.endpoint} did not answer within",
                f"{waited:.1f} s (join timeout {timeout}): {exc}",
            )
        )
    if isinstance(exc, StoreProtocolError) or isinstance(exc.__cause__, StoreProtocolError):
        head = f"something answered at {cfg.endpoint}, but it is not a rendezvous store"
    else:
        head = f"no rendezvous server answered at {cfg.endpoint}"
    return RendezvousConnectionError(
        _msg(
            f"rank {cfg.rank}: {head} within the join timeout ({timeout}): {str(exc).rstrip('.')}.",
            "Node 0 hosts the store: check that it started and could bind the port.",
        )
    )


def mismatch_message(where: str, me: Identity, first: Identity) -> str:
    """Two nodes expect different world sizes."""
    return _msg(
        f"world size mismatch in {where}: this node, {me.describe()}, expects",
        f"{me.world_size} nodes but {first.describe()} joined first expecting",
        f"{first.world_size}; give every node the same max_nodes (--nnodes).",
    )


def duplicate_message(where: str, holder: Identity, me: Identity) -> str:
    """Two live nodes (or nodes of two machines) claim one rank."""
    return _msg(
        f"duplicate rank {me.rank} in {where}: claimed by {holder.host} pid {holder.pid}",
        f"and by {me.host} pid {me.pid}; give every node a distinct rank (--node-rank) in",
        f"0..{me.world_size - 1}.",
    )


def closed_message(cfg: StaticConfig, by: Identity, me: Identity, round_index: int) -> str:
    """The rendezvous was closed by ``by``."""
    return _msg(
        f"the rendezvous of run '{cfg.run_id}' at {cfg.endpoint} was closed by",
        f"{by.describe()}; no further rounds run (this node: {me.describe()}, round",
        f"{round_index}).",
    )


def stale_message(where: str, me: Identity) -> str:
    """``me`` arrived in a round that had already completed."""
    return _msg(
        f"{where} already completed before this node, {me.describe()}, joined; a static",
        "rendezvous does not admit late or restarted nodes into a finished round: restart",
        "every node, or use a fresh run_id.",
    )


def unread_message(where: str, missing: list[int], timeout: float) -> str:
    """The hosting node's exit barrier gave up on ``missing`` ranks."""
    return _msg(
        f"{where} completed, but ranks {format_ranks(missing)} did not confirm reading the",
        f"result within {timeout:g} s (read_timeout); they probably died right after joining.",
    )
