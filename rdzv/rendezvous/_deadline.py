"""What a member does once its join deadline passed: one node names the missing ranks.

Invariant 11 of :mod:`rdzv.rendezvous._join`. When every node starts together with the same
join timeout, the deadlines of nearly every member pass within a few milliseconds of each
other (a thousand of them, at 1024 nodes). If each of them woke and asked the store which
ranks are missing -- or only cancelled its wait and asked whether someone else was doing
it -- the store host and the machine's cores would be flooded in the one instant the
overshoot allows, and some members would report the missing ranks as "not determined". So
one node names them and every other waits for its verdict, blocked in one request on
``done`` (which the store answers the moment the verdict is written; a blocked process
uses no CPU and sends nothing):

1. **The hosting node, when it runs the store in-process** (not here: in
   :meth:`rdzv.rendezvous._lost_member.LostMemberWatch.decide`). Every member writes the
   seconds left to its deadline at the head of its confirmation; the host keeps the
   earliest, on its own clock, and when it passes with a rank missing proposes the timeout
   verdict from the claims and confirmations it saw: no request to ask, no member woken.
2. **Watchmen** (a store hosted outside: no ``arbiter`` key when they look, right after
   joining). Only the first :data:`WATCHMEN` members to join (their ``add`` on ``count``
   returned at most that) end their wait at their deadline; when the hosting node
   arbitrates they wait like everyone else (3), since a watchman that cancels its wait at
   the busiest moment of a busy store may lose its connection to an unanswered cancel
   before the host's verdict reaches it. The first whose ``add`` on the round's ``diagnosing`` key
   returns 1 reads the ``joined`` list, checks the claims of at most :data:`CLAIMS_ASKED`
   missing ranks, and proposes the ``timeout`` verdict; the other watchmen wait for it.
3. **Everyone else** waits :data:`LATE_WAKE` past its deadline for the verdict: as long as
   a cancelled wait still ends by ``hard_end`` (when a busy host's or network's verdict is
   late, the more slack the better, and a member that does not wake sends nothing; a
   member whose verdict comes returns at once, so only a round that nobody diagnoses costs
   it the whole wait). Then it holds the same
   election: elected (no watchman ever got that far: they died, hung, are cut off, or
   started much later than it), it names the missing ranks with what is left; else it
   reads the elected one's verdict, as a member whose wait ended late does (4) -- one
   request, never a diagnosis of its own: when the store is that slow, a thousand
   diagnoses would only slow it more.

A watchman that lost the election and got no verdict by :data:`WAIT_FOR_DIAGNOSER` past its
deadline (the elected one died) names the missing ranks itself.

4. **A member whose wait ended late** -- its process was not scheduled when its wait was
   due to end (a busy machine), or the store answered late, so that it finds no time left
   for the election before it read any verdict -- still reads the one that exists: one
   read of ``done``, bounded by :data:`LATE_READ` from the moment it finds the time gone
   (or by ``hard_end``, when more is left: a watchman whose cancel went unanswered at its
   deadline, or whose own verdict could not be published), over its own connection or,
   when the client closed that one (the store did not answer a cancelled wait in time),
   over a fresh one. Only when that read finds no verdict either
   does it say the missing ranks could not be determined, and it proposes that as the
   round's verdict (within :data:`PROPOSE_BOUND` more per connection): a round that a node
   not run for long would otherwise complete later, finding every rank confirmed, then
   fails on every node rather than return a world with a member that gave up. A late
   member that lost the election reads the same way instead of giving up at once. So a
   thousand deadlines passing together on two busy cores cost a member some overshoot,
   never the verdict.

Every proposal is compare_set("", ...) on ``done``: the first verdict written decides, and
a ``complete`` verdict that won the race still wins (invariant 3). Past the deadline every
store operation is bounded (invariant 9): a cancelled wait on ``done`` by the store's answer
to CANCEL_WAIT (the rdzv client closes the connection when that answer is
:data:`CANCEL_BOUND` late), the election and the diagnosis by ``hard_end`` minus
:data:`VERDICT_RESERVE`, the verdict by ``hard_end``. ``OVERSHOOT``
(:mod:`rdzv.rendezvous._round_io`) is sized so that a watchman whose wait for the diagnoser
is cancelled as late as the client allows still ends by ``hard_end``:
``WAIT_FOR_DIAGNOSER + CANCEL_BOUND + VERDICT_RESERVE == OVERSHOOT``, and so does a member
woken :data:`LATE_WAKE` past its deadline: ``LATE_WAKE + CANCEL_BOUND == OVERSHOOT``. The
one exception is the late read of 4: a member that has not read the verdict when its time
is spent ends at most :data:`LATE_READ` after it found the time gone (that moment itself is
as late as the machine scheduled this process: no deadline bounds a process that does not
run), and a member that read none proposes its own within :data:`PROPOSE_BOUND` on its
connection and as much on a fresh one. So a join outlives its deadline by at most 9 s, plus
2 s for the late read and 2 s to propose, plus however long the machine did not run the
process.
"""

from __future__ import annotations

from collections.abc import Callable

from rdzv.errors import RendezvousTimeoutError, StoreClosedError, StoreError, StoreTimeoutError
from rdzv.events import WARNING
from rdzv.rendezvous._connection import close_store
from rdzv.rendezvous._round_failures import timeout_message
from rdzv.rendezvous._round_io import OVERSHOOT
from rdzv.rendezvous._round_rules import (
    CLAIMS_ASKED,
    WATCHMEN,
    after_deadline,
    elected,
    missing_ranks,
    ranks_in,
    ranks_to_ask,
    watches,
)
from rdzv.rendezvous._round_state import encode_verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from rdzv.rendezvous._round_io import RoundIO
    from rdzv.store.base import Store

__all__ = [
    "CANCEL_BOUND",
    "CLAIMS_ASKED",
    "LATE_READ",
    "LATE_WAKE",
    "PROPOSE_BOUND",
    "VERDICT_RESERVE",
    "WAIT_FOR_DIAGNOSER",
    "WATCHMEN",
    "publish_verdict",
    "timeout_verdict",
    "verdict_grace",
    "watches",
]

#: Seconds past a wait's deadline the rdzv client allows the store to answer CANCEL_WAIT
#: (``rdzv.store.client._waits.GRACE``).
CANCEL_BOUND: Final = 0.4
#: Seconds of the overshoot kept for publishing the timeout verdict.
VERDICT_RESERVE: Final = 0.2
#: Seconds past its own deadline a member waits for the diagnoser's verdict before it names
#: the missing ranks itself (the overshoot minus a cancellation and the reserve).
WAIT_FOR_DIAGNOSER: Final = OVERSHOOT - CANCEL_BOUND - VERDICT_RESERVE
#: The first :data:`WATCHMEN` members to join wake at their deadline and hold the election,
#: the others this many seconds past theirs (if no verdict came), then hold it too: as
#: late as a cancelled wait still ends by ``hard_end``.
LATE_WAKE: Final = OVERSHOOT - CANCEL_BOUND
#: Seconds a member that finds the overshoot spent before it read any verdict (its wait ended
#: late: its process was not scheduled, or the store answered late) still gives to one read of
#: the verdict, counted from the moment it finds the time gone: connecting again included
#: when the client closed its connection, and the store's answer to a cancel when no verdict
#: exists. 2 s: a member whose process was not run reads the verdict already waiting on its
#: own connection at once; one whose connection was closed needs a connection, a handshake
#: and a request, which a busy store or path may not give it even in 2 s (the long waits
#: that ``OVERSHOOT`` allows are what keep members off this path).
LATE_READ: Final = 2.0


#: Seconds a member that read no verdict late (4) has to propose its own (a compare_set on
#: ``done``, which a store that answers at all answers in milliseconds), on its connection
#: and, if the client closed that one (a cancel answered too late), on a fresh one.
PROPOSE_BOUND: Final = 1.0


class _NoTimeLeft(Exception):
    """The diagnosis ran out of its share of the overshoot."""


def verdict_grace(watchman: bool) -> float:
    """How far past its deadline a member's wait for the verdict runs before it wakes."""
    return 0.0 if watchman else LATE_WAKE


def timeout_verdict(io: RoundIO, watchman: bool) -> bytes:
    """The round's verdict once ``io``'s deadline passed: the elected diagnoser's, this
    node's own (elected, or no verdict came in time), or one that won the race.

    Args:
        io: the round as this member sees it (its deadline passed).
        watchman: whether this member is a watchman (see :func:`watches`).

    Returns:
        The raw verdict stored in ``done`` (the caller acts on it).

    Raises:
        RendezvousTimeoutError: no verdict could be read and this node's own could not be
            published in time (its message still names what the diagnosis found), or the
            connection ended while it waited for the diagnoser's (see ``RoundIO.raise_store``).
    """
    done = io.keys.of(io.round, "done")
    chosen = _elected(io)
    step = after_deadline(chosen, watchman)
    if step == "read_late" and chosen is None:  # its wait ended late (4): read what exists
        return _read_or_fail(io, done, "no time was left to ask the store")
    if step == "diagnose":
        return _diagnose_and_publish(io, done)
    if step == "read_late":  # woke LATE_WAKE past its deadline: the elected one's verdict (4)
        return _read_or_fail(io, done, "the member elected to name them published nothing in time")
    # Another member is naming them: wait for its verdict, then name them itself.
    raw = _await_diagnoser(io, done)
    if raw is not None:
        return raw
    io.event("diagnoser_silent", WARNING, waited_for=io.clock() - io.deadline)
    return _diagnose_and_publish(io, done)


def _read_late(io: RoundIO, done: str, proposal: bytes | None = None) -> bytes | None:
    """The verdict in ``done``, read by a member that found the overshoot spent or could not
    use it (4), by ``hard_end`` or within :data:`LATE_READ` from now, whichever is later;
    None if there is none by then or the store cannot be read.

    With a ``proposal`` (this member's own verdict: it is giving up), a read that finds no
    verdict by then proposes it (compare_set on ``done``, within :data:`PROPOSE_BOUND`) and
    returns the verdict that won: so no node can complete the round later without a member
    that gave up on it (a node not run for long, finding every rank confirmed, would).

    Over ``io.store`` first; when the client closed that connection (its store did not
    answer a cancelled wait in time), over a fresh one, which also carries this member's
    acknowledgement (see ``RoundVerdict.act_on``) and is closed afterwards; ``io`` then
    counts its own connection as lost, so the node dials again for its next round.
    """
    began = io.clock()
    until = max(began + LATE_READ, io.hard_end)  # what is left of the overshoot, if more
    raw: bytes | None = None
    fresh = False
    error: StoreError | None = None
    try:
        raw = _verdict_by(io.store, done, until, proposal, io.clock)
    except StoreClosedError:
        fresh = True
    except StoreError as exc:
        error = exc
    if fresh:
        io.connection_lost = True
        raw, error = _read_over_fresh(io, done, until, proposal)
    fields: dict[str, object] = {}
    if raw is None and error:
        fields["error"] = f"{type(error).__name__}: {error}"
    if proposal is not None:
        fields["proposed"] = raw == proposal
    past = round(began - io.deadline, 3)
    io.event(
        "verdict_read_late",
        WARNING,
        past_deadline=past,
        fresh=fresh,
        found=raw is not None and raw != proposal,
        **fields,
    )
    return raw


def _read_or_fail(io: RoundIO, done: str, why: str) -> bytes:
    """The verdict read late (4), else this member's own: the missing ranks could not be
    determined (proposed, so that the round cannot complete without it later; when even
    that cannot be written, raised)."""
    unknown = f"{why}; no verdict could be read within {LATE_READ:g} s after that"
    message = timeout_message(io.cfg, io.where, io.waited(), None, [], unknown)
    raw = _read_late(io, done, encode_verdict(io.aborted("timeout", message)))
    if raw is None:
        io.fail(RendezvousTimeoutError(message))
    return raw


def _verdict_by(
    store: Store, done: str, until: float, proposal: bytes | None, clock: Callable[[], float]
) -> bytes:
    """The verdict in ``done`` by ``until``; with a ``proposal``, when none came by then,
    the proposal compare_set within :data:`PROPOSE_BOUND` (the verdict that won).

    Raises:
        StoreError: no verdict was read (and none could be proposed) in time.
    """
    if proposal is None:
        return _get_by(store, done, until, clock)
    try:
        return _get_by(store, done, until, clock)
    except StoreTimeoutError:  # none came: propose this member's own
        store.set_timeout(max(until - clock(), PROPOSE_BOUND))
        raw: bytes = store.compare_set(done, "", proposal)
        return raw


def _get_by(store: Store, key: str, until: float, clock: Callable[[], float]) -> bytes:
    """``store.get(key)`` (waiting for the key), ended by ``until`` on ``clock``: the wait's
    cancel, which the client allows :data:`CANCEL_BOUND`, included."""
    if (left := until - CANCEL_BOUND - clock()) <= 0:
        raise StoreTimeoutError("no time was left to read the verdict")
    store.set_timeout(left)
    raw: bytes = store.get(key)
    return raw


def _read_over_fresh(
    io: RoundIO, done: str, until: float, proposal: bytes | None
) -> tuple[bytes | None, StoreError | None]:
    """The verdict read (or proposed) over a fresh connection by ``until``, or why not."""
    left = until - io.clock()
    if proposal is not None:  # its read may be spent: it still has this to propose
        left = max(left, PROPOSE_BOUND)
    if io.reconnect is None or left <= CANCEL_BOUND:
        return None, None
    fresh: Store | None = None
    try:
        fresh = io.reconnect(left)
        raw = _verdict_by(fresh, done, until, proposal, io.clock)
        fresh.set(io.keys.of(io.round, f"ack/{io.me.rank}"), b"1")  # one-way: no wait
    except StoreError as exc:
        return None, exc
    finally:
        if fresh is not None:
            close_store(fresh)
    return raw, None


def _elected(io: RoundIO) -> bool | None:
    """Whether this node is the round's diagnoser: its ``add`` on ``diagnosing`` came first;
    None when no time was left to ask (its wait ended late, 4).

    A store that cannot answer elects this node: its own diagnosis then says what failed."""
    left = io.hard_end - VERDICT_RESERVE - io.clock()
    if left <= 0:
        return None
    try:
        io.store.set_timeout(left)
        chosen = elected(io.store.add(io.keys.of(io.round, "diagnosing"), 1))
    except StoreError:
        return True
    if chosen:
        io.event("diagnosing")
    return chosen


def _await_diagnoser(io: RoundIO, done: str) -> bytes | None:
    """Block in one request until the verdict exists, at most until ``WAIT_FOR_DIAGNOSER``
    past the deadline; None if it did not come."""
    left = io.deadline + WAIT_FOR_DIAGNOSER - io.clock()
    if left <= 0:
        return None
    try:
        io.store.set_timeout(left)
        raw: bytes = io.store.get(done)
    except StoreTimeoutError:
        return None
    except StoreError as exc:
        io.raise_store(exc, "waiting for the diagnosis of the round")
    return raw


def _diagnose_and_publish(io: RoundIO, done: str) -> bytes:
    confirmed, claimed, unknown = _diagnose(io)
    message = timeout_message(io.cfg, io.where, io.waited(), confirmed, claimed, unknown)
    return publish_verdict(io, message)


def publish_verdict(io: RoundIO, message: str) -> bytes:
    """Propose this node's ``timeout`` verdict ``message`` (compare_set on ``done``, bounded
    by ``hard_end``, also when this node's own deadline is further: the hosting node names
    the ranks at a member's deadline); return the verdict that won or, when it could not be
    written, the one another member published meanwhile (read late, 4).

    Raises:
        RendezvousTimeoutError: neither (the error says ``message``, this node's own).
    """
    done = io.keys.of(io.round, "done")
    encoded = encode_verdict(io.aborted("timeout", message))
    try:
        if (left := io.hard_end - io.clock()) <= 0:
            raise StoreTimeoutError("no time was left to publish the verdict")
        io.store.set_timeout(left)
        raw: bytes = io.store.compare_set(done, "", encoded)
    except StoreError as exc:  # the others learn it at their own deadline
        io.event("failure_not_published", error=f"{type(exc).__name__}: {exc}")
        late = _read_late(io, done)  # another member's, published meanwhile (4)
        if late is None:
            io.fail(RendezvousTimeoutError(message))
        return late
    return raw


def _diagnose(io: RoundIO) -> tuple[list[int] | None, list[int], str]:
    """Which ranks joined, which only claimed, before ``hard_end`` minus the reserve;
    ``(None, [], why)`` when the store could not tell in time.

    A few requests whatever the world size: the ``joined`` list in one GET (this member
    appended to it, over the same connection, before its deadline could pass), then the
    claims of at most :data:`CLAIMS_ASKED` missing ranks.
    """
    k, until, world_size = io.round, io.hard_end - VERDICT_RESERVE, io.me.world_size
    joined_key = io.keys.of(k, "joined")
    claimed: list[int] = []

    def ask(call: Callable[..., Any], *args: Any) -> Any:
        if (left := until - io.clock()) <= 0:
            raise _NoTimeLeft
        io.store.set_timeout(left)
        return call(*args)

    try:
        raw = ask(io.store.get, joined_key)  # exists: this member appended to it
        joined = ranks_in(raw, world_size)
        for rank in ranks_to_ask(missing_ranks(joined, world_size)):
            if ask(io.store.check, [io.keys.claim(k, rank)]):
                claimed.append(rank)
    except _NoTimeLeft:
        return None, [], "no time was left to ask the store"
    except StoreTimeoutError:
        return None, [], "the store did not answer in time"
    except StoreError as exc:
        return None, [], f"the store could not be asked: {exc}"
    return sorted(joined), claimed, ""
