"""How a round of the static rendezvous fails: the errors and messages users see (pure).

Builds the text of a timeout diagnosis, of a lost store connection, of a member that
vanished, and translates store failures (at connect time and mid-round) and verdicts into
the rendezvous error classes. No I/O: the callers (:mod:`rdzv.rendezvous._round_io`,
:mod:`rdzv.rendezvous._join`, :mod:`rdzv.rendezvous._node`, :mod:`rdzv.rendezvous._exit`,
:mod:`rdzv.rendezvous._lost_member`) gather the facts and raise.

Every figure "after X s" / "waited X s" is measured from where the join deadline started
(the start of ``next_rendezvous``), and when that deadline is what passed it is never shown
below the configured timeout, whatever the rounding (:func:`format_waited`).
"""

from __future__ import annotations

import errno as errno_names
import math

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousError,
    RendezvousStateError,
    RendezvousTimeoutError,
    StoreBindError,
    StoreConnectionError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)
from rdzv.rendezvous._round_state import Identity, format_ranks
from rdzv.rendezvous._static_config import StaticConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "after_deadline_failure",
    "closed_message",
    "connect_error",
    "duplicate_message",
    "format_waited",
    "lost_connection_message",
    "member_lost_message",
    "mismatch_message",
    "stale_message",
    "store_failure",
    "timeout_message",
    "verdict_error",
]

_ERROR_BY_REASON: Final[dict[str, type[RendezvousError]]] = {
    "duplicate_rank": RendezvousStateError,
    "world_size_mismatch": RendezvousStateError,
    "timeout": RendezvousTimeoutError,
    "connection_lost": RendezvousConnectionError,
    "member_lost": RendezvousConnectionError,
}

#: What to check when no store answered, by the cause the connect observed
#: (``StoreConnectionError.connect_cause``, from :func:`rdzv.store.client._causes.classify`). A
#: store that failed to bind on a live host is refused, never silent nor unreachable.
_CONNECT_ADVICE: Final[dict[str | None, str]] = {
    "refused": (
        "Nothing listens there: check that node 0 started and could bind the port (its log "
        "says), and that every node was given the same host:port."
    ),
    "no answer": (
        "A firewall dropping the port, or a host that is down, looks like this: check that "
        "the port is open from this node to node 0's host (firewalls, security groups, "
        "network policies) and that the host is up."
    ),
    "no route": (
        "Check the addressing (is that an address of node 0 on a network this node reaches?) "
        "and the routing between the hosts."
    ),
    "reset": (
        "Something on the path reset it: check what lies between the hosts (a proxy, a "
        "firewall) and what listens on that port (a different service?)."
    ),
    "unresolvable": (
        "Check the host name and this node's DNS (a name created with node 0 may not exist yet)."
    ),
    "not a store": (
        "Check that host:port is node 0's rendezvous endpoint: another service, or a "
        "stalled store, holds that port."
    ),
    None: "Node 0 hosts the store: check that it started and could bind the port.",
}


def _msg(*parts: str) -> str:
    return " ".join(parts)


def format_waited(waited: float, at_least: float = 0.0) -> str:
    """``waited`` seconds to one decimal, never shown below ``at_least``.

    Pass the configured timeout as ``at_least`` when that deadline is what passed: 7.96 s
    of an 8 s timeout must not read "7.9" nor "8.0" read below 8 s ("gave up early").
    """
    shown = f"{max(waited, at_least):.1f}"
    if float(shown) < at_least:
        shown = f"{math.ceil(at_least * 10) / 10:.1f}"
    return shown


def _seconds(cfg: StaticConfig) -> float:
    return cfg.join_timeout.total_seconds()


def timeout_message(
    cfg: StaticConfig,
    where: str,
    waited: float,
    confirmed: list[int] | None,
    claimed: list[int],
    unknown: str = "",
    for_rank: int | None = None,
) -> str:
    """The diagnosis of a round whose deadline passed.

    Args:
        cfg: the settings of the node that reports.
        where: "round k of run 'x' at host:port".
        waited: seconds the reporting node waited, from where its join deadline started.
        confirmed: ranks that claimed their place and were counted (they joined); None when
            that could not be found out in time (``unknown`` says why).
        claimed: ranks that claimed their place but never confirmed (never counted).
        unknown: why the missing ranks could not be determined (with ``confirmed=None``).
        for_rank: the member whose join deadline passed, when it is not the reporting node's
            (the hosting node names the missing ranks for it; ``waited`` is then the
            reporting node's own wait, shown as it is, and its timeout is not named).
    """
    timeout = _seconds(cfg)
    if for_rank is None:
        parts = [f"rendezvous {where} timed out after {format_waited(waited, timeout)} s:"]
    else:
        parts = [
            f"rendezvous {where} timed out when the join deadline of rank {for_rank} passed",
            f"(after {format_waited(waited)} s here):",
        ]
    if confirmed is None:
        parts.append(f"which ranks are missing could not be determined ({unknown}).")
    else:
        missing = [rank for rank in range(cfg.world_size) if rank not in confirmed]
        parts += [
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
    raise_it = "Start the missing nodes, check their logs, or raise the join timeout"
    parts += [raise_it + "." if for_rank is not None else f"{raise_it} ({timeout:g} s)."]
    return _msg(*parts)


def after_deadline_failure(
    cfg: StaticConfig, where: str, waited: float, exc: StoreError
) -> RendezvousTimeoutError:
    """This node's join deadline had passed when its store connection ended.

    The round timed out here whatever the store host did next; the host, whose deadline
    passes at about the same time, gives up too and closes its store. So an EOF then says
    only that, never that the host crashed. ``exc.seen``, when the store client sets it,
    says what was observed: ``"eof"`` or ``"shutdown"`` (the server said it is closing),
    ``"reset"``, anything else; without it, a ``ConnectionResetError`` cause means a reset.
    """
    seen = getattr(exc, "seen", None)
    if seen is None and isinstance(exc.__cause__, ConnectionResetError):
        seen = "reset"
    after = "after this node's join deadline had passed"
    if seen in ("eof", "shutdown"):
        what = f"the store host closed the connection {after} (it gave up on the round too)"
    elif seen == "reset":
        what = f"the connection to the store was reset {after}"
    else:
        what = f"the store connection failed {after}"
    timeout = _seconds(cfg)
    return RendezvousTimeoutError(
        _msg(
            f"rendezvous {where} timed out after {format_waited(waited, timeout)} s: {what},",
            f"so which ranks are missing could not be determined ({exc}). Check the other",
            f"nodes' logs, or raise the join timeout ({timeout:g} s).",
        )
    )


def lost_connection_message(where: str, me: Identity, doing: str, exc: StoreError) -> str:
    """What a node that lost its store connection mid-join tells the others (its verdict)."""
    return _msg(
        f"rendezvous {where} failed: {me.describe()} lost its connection to the rendezvous",
        f"store while {doing}: {exc}. The round cannot complete without that node; check",
        "its log and its network, then restart the round.",
    )


def store_failure(
    exc: StoreError, endpoint: str, where: str, doing: str, waited: float, at_least: float = 0.0
) -> RendezvousError:
    """Translate a store failure mid-round into the rendezvous error users see.

    ``waited`` is shown with :func:`format_waited` (``at_least``: the join timeout when the
    join deadline is what passed).

    Returns:
        ``RendezvousTimeoutError`` when the store did not answer in time;
        ``RendezvousConnectionError`` otherwise (the connection broke, or the peer is not a
        rendezvous store).
    """
    shown = format_waited(waited, at_least)
    if isinstance(exc, StoreTimeoutError):
        what = f"the rendezvous store at {endpoint} did not answer in time"
        return RendezvousTimeoutError(
            _msg(f"{what} while {doing} in {where}, after {shown} s: {exc}")
        )
    if isinstance(exc, StoreProtocolError):
        what = f"the peer at {endpoint} is not a rendezvous store"
    else:
        what = f"lost the rendezvous store at {endpoint} (hosted by rank 0)"
    return RendezvousConnectionError(
        _msg(f"{what} while {doing} in {where}, after {shown} s: {exc}")
    )


def connect_error(cfg: StaticConfig, exc: StoreError, waited: float) -> RendezvousError:
    """Translate a failure to create the store into the rendezvous error users see.

    ``waited``: seconds since the join deadline started (the connect is bounded by it).
    """
    timeout = f"{_seconds(cfg):g} s"
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
                f"{format_waited(waited, _seconds(cfg))} s (join timeout {timeout}): {exc}",
            )
        )
    cause = exc.connect_cause if isinstance(exc, StoreConnectionError) else None
    if isinstance(exc, StoreProtocolError) or isinstance(exc.__cause__, StoreProtocolError):
        cause = "not a store"
    said = str(exc).rstrip(".")
    if cfg.endpoint not in said:  # the store's message names the endpoint it dialled, once
        said = f"the rendezvous store at {cfg.endpoint}: {said}"
    return RendezvousConnectionError(
        _msg(
            f"rank {cfg.rank} (join timeout {timeout}): {said}.",
            _CONNECT_ADVICE.get(cause, _CONNECT_ADVICE[None]),
        )
    )


def mismatch_message(where: str, me: Identity, first: Identity, did: str = "joined first") -> str:
    """Two nodes expect different world sizes (``first`` ``did`` what it did)."""
    return _msg(
        f"world size mismatch in {where}: this node, {me.describe()}, expects",
        f"{me.world_size} nodes but {first.describe()} {did} expecting",
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


def member_lost_message(where: str, lost: Identity, grace: float) -> str:
    """A member's store connection closed before the round completed, and no restarted
    process took its claim over within ``grace`` seconds."""
    return _msg(
        f"rendezvous {where} failed: {lost.describe()} disappeared: its connection to the",
        "store closed before the round completed (it may have died or lost its network),",
        f"and no restarted rank {lost.rank} took its place within {grace:g} s. The round cannot",
        "complete without that node; check its log, then restart the round.",
    )


def verdict_error(verdict: dict[str, Any], me: Identity, waited: float) -> RendezvousError:
    """The error an ``aborted`` verdict stands for on node ``me``: the class its reason
    names, its message and, when another node wrote it, who did and how long ``me`` waited
    (``waited`` seconds, from where its join deadline started)."""
    by = Identity(**verdict["by"])
    error = _ERROR_BY_REASON.get(verdict.get("reason", ""), RendezvousStateError)
    message = str(verdict.get("message", "the round was aborted"))
    if by != me:
        message = _msg(
            message,
            f"[reported by {by.describe()}; this node, {me.describe()},",
            f"waited {format_waited(waited)} s]",
        )
    return error(message)
