"""The round's decisions, without I/O: what a node does given what it read.

Every rule of :mod:`rdzv.rendezvous._join`'s protocol that decides something lives here,
each citing the invariant (numbered in that module's doc) it keeps. Nothing here touches a
socket, a clock, a thread or a random number: the store's answers, the time and whether a
process runs come in as arguments. :class:`~rdzv.rendezvous._join.RoundProtocol` (through
:class:`~rdzv.rendezvous._round_io.RoundIO`), :mod:`rdzv.rendezvous._deadline` and
:class:`~rdzv.rendezvous._lost_member.LostMemberWatch` do the reading and writing and ask
these functions what follows; the round's simulation (tests/rdzv/round_sim.py) drives the
same functions over a simulated store and clock.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping
    from typing import Any, Final, Literal

    Route = Literal["decide", "complete_when_confirmed", "await_verdict"]
    HostOutcome = Literal["verdict", "closed", "complete", "deadline", "member_deadline"]
    Refusal = Literal["closed", "stale", "verdict"]
    PastDeadline = Literal["read_late", "diagnose", "await_diagnoser"]

__all__ = [
    "CLAIMS_ASKED",
    "WATCHMEN",
    "after_deadline",
    "after_joining",
    "asks_for_arbiter",
    "completes",
    "elected",
    "host_decision",
    "is_success",
    "loss_watched",
    "may_take_over",
    "member_lost",
    "missing_ranks",
    "publishes_loss",
    "ranks_in",
    "ranks_to_ask",
    "refusal",
    "watches",
    "world_sizes_agree",
]

#: The first members to join wake at their deadline and hold the election (invariant 11).
WATCHMEN: Final = 8
#: A diagnosis checks the claims of at most this many missing ranks (at 4096 nodes, asking
#: for every rank's keys one by one took longer than the overshoot allows; invariant 11).
CLAIMS_ASKED: Final = 64


def world_sizes_agree(mine: int, first: int) -> bool:
    """Invariant 1: a node whose world size differs from the round's first node's aborts
    the round for everyone (``world_size_mismatch``) instead of joining it."""
    return mine == first


def may_take_over(same_machine: bool, holder_alive: bool) -> bool:
    """Invariant 6: a node may replace the claim of its rank only when the claimant runs on
    this machine and no longer exists; a live claimant or another machine's is a duplicate
    rank. (Whether the round already has a verdict is asked next: see :func:`refusal`.)"""
    return same_machine and not holder_alive


def refusal(verdict_status: str, closed: bool) -> Refusal:
    """Invariant 5: what a node that is not a member of a round with a verdict raises: the
    run was closed, the round completed without it (stale state), or the failed verdict."""
    if verdict_status == "complete":
        return "closed" if closed else "stale"
    return "verdict"


def watches(joined: int, watchmen: int = WATCHMEN) -> bool:
    """Invariant 11: whether the member whose ``add`` on ``count`` returned ``joined`` is a
    watchman (wakes at its own deadline)."""
    return joined <= watchmen


def asks_for_arbiter(watchman: bool, hosts: bool, joined: int, world_size: int) -> bool:
    """Invariant 11: whether a member looks for ``arbiter`` after joining (a watchman whose
    ``add`` did not fill ``count``, on a node that does not host the arbiter itself); when
    it finds one it waits for the hosting node's verdict like every member."""
    return watchman and not hosts and joined < world_size


def watches_once_counted(
    joined: int, world_size: int, hosts: bool, arbitrated: bool | None
) -> bool | None:
    """Invariant 11: whether the member counted in as the ``joined``-th watches; None: it
    must first ask whether the hosting node arbitrates (``arbitrated`` not known)."""
    watchman = watches(joined)  # not needed where the host arbitrates
    if not asks_for_arbiter(watchman, hosts, joined, world_size):
        return watchman
    return None if arbitrated is None else not arbitrated


def after_joining(
    joined: int, world_size: int, hosts: bool, arbitrated: bool | None = None
) -> Route:
    """Invariants 2 and 10: what a member does once it counted itself: the hosting node that
    arbitrates decides (``decide``); the node whose ``add`` filled ``count`` completes the
    round once every rank confirmed, unless it already knows that a hosting node arbitrates
    (``arbitrated``: ``arbiter`` was set when it counted itself; it is never unset); every
    other member waits for the verdict."""
    if hosts:
        return "decide"
    if joined >= world_size and not arbitrated:
        return "complete_when_confirmed"
    return "await_verdict"


def completes(every_rank_confirmed: bool, arbiter: bool) -> bool | None:
    """Invariants 2 and 10, for the node whose ``add`` filled ``count``: True to write
    ``complete`` (every rank confirmed and no hosting node arbitrates), False to wait for
    the hosting node's verdict (it arbitrates), None to look again (a rank has not
    confirmed yet: ``count`` is only the trigger)."""
    if not every_rank_confirmed:
        return None
    return not arbiter


def host_decision(
    has_verdict: bool,
    closed: bool,
    confirmed: Collection[int],
    world_size: int,
    pending: Collection[int],
    deadline_left: float,
    member_due_left: float | None,
) -> HostOutcome | None:
    """Invariants 10 and 11, the hosting node's completion decision from its member watch:
    ``complete`` only once every rank confirmed and no claim's connection closed without a
    takeover (``pending``); ``member_deadline`` when the earliest deadline a member reported
    passed with a rank missing; ``deadline`` when its own passed; None to wait for a change.

    Args:
        has_verdict: the round has its verdict (or was decided complete).
        closed: the watch was closed (this node is leaving).
        confirmed: the ranks with a confirmation.
        world_size: the round's world size.
        pending: the ranks whose claim's connection closed and was not taken over.
        deadline_left: seconds to this node's own deadline.
        member_due_left: seconds to the earliest member deadline; None: none reported.
    """
    if has_verdict:
        return "verdict"
    if closed:
        return "closed"
    if len(confirmed) >= world_size and not pending:
        return "complete"
    if deadline_left <= 0:
        return "deadline"
    if member_due_left is not None and len(confirmed) < world_size and member_due_left <= 0:
        return "member_deadline"
    return None


def loss_watched(own: bool, settled: bool, ended: bool) -> bool:
    """Invariant 8: whether the hosting node waits for the takeover of a claim whose
    connection closed (then fails the round): not its own, not of a round it settled, and
    not once the round has a verdict or completed (a member lost then is the exit
    barrier's business)."""
    return not (own or settled or ended)


def member_lost(has_verdict: bool, claim_now: bytes | None, vanished: bytes) -> bool:
    """Invariant 8: whether the hosting node writes ``member_lost`` for a claim whose
    connection closed: the round has no verdict and nobody took the claim over."""
    return not has_verdict and claim_now == vanished


def publishes_loss(joining: bool, deadline_left: float) -> bool:
    """Invariant 7: whether a member whose store connection broke tells the others over a
    fresh connection (an ``aborted`` verdict, reason ``connection_lost``): only mid-join,
    before its deadline (past it, the others are past theirs too, invariant 9)."""
    return joining and deadline_left > 0


def elected(diagnosing: int) -> bool:
    """Invariant 11: the member whose ``add`` on ``diagnosing`` returned 1 names the missing
    ranks; every other waits for its verdict."""
    return diagnosing == 1


def after_deadline(elected: bool | None, watchman: bool) -> PastDeadline:
    """Invariant 11, past a member's deadline: the elected member names the missing ranks;
    a watchman that was not waits for its verdict (and names them itself if none comes); a
    member woken late, or with no time left to hold the election (``elected`` None), reads
    the verdict that exists (invariant 9)."""
    if elected is None:
        return "read_late"
    if elected:
        return "diagnose"
    return "await_diagnoser" if watchman else "read_late"


def ranks_in(raw: bytes, world_size: int) -> set[int]:
    """The ranks of the round's ``joined`` list (``b"3,0,7,"``); junk and strays ignored."""
    ranks = set()
    for part in raw.split(b","):
        if part.strip().isdigit() and int(part) < world_size:
            ranks.add(int(part))
    return ranks


def missing_ranks(joined: Collection[int], world_size: int) -> list[int]:
    """Invariant 11: the ranks a timeout verdict names as missing: every rank of the world
    that is not in ``joined``, in order."""
    return [rank for rank in range(world_size) if rank not in joined]


def ranks_to_ask(missing: list[int]) -> list[int]:
    """Invariant 11: the missing ranks whose claims a diagnosis checks (the first
    :data:`CLAIMS_ASKED`)."""
    return missing[:CLAIMS_ASKED]


def is_success(verdict: Mapping[str, Any]) -> bool:
    """Invariants 1 and 3: a member returns success exactly when the round's one verdict
    is ``complete`` -- the verdict, not its local clock, decides."""
    return bool(verdict["status"] == "complete")
