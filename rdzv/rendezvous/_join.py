"""The static join protocol: one round of a fixed-size rendezvous over a shared store.

The keys it uses are described in :mod:`rdzv.rendezvous._round_state`. A member's happy
path costs two round trips after connecting to an rdzv store server: compare_set(first)
with compare_set(claim) (one write, ``compare_sets``), then add(count) with
set(confirmed) and append(joined) (the store has every confirmation by the time ``count``
is full), a CHECK of ``arbiter`` (invariant 11) and the verdict's blocking WAIT+GET, in one
write (``add_then_get``, :mod:`rdzv.rendezvous._count`); the ack is a one-way message.
Over a store that cannot serve a request sent behind a WAIT (torch's), the verdict's
WAIT+GET is a round trip of its own and only the first ``WATCHMEN`` members CHECK
``arbiter`` (one more); over other stores each request is its own. The node whose add
filled ``count`` cancels the held wait when it must complete the round itself, and spends
one more (a CHECK of every rank's confirmation). Failure paths may spend more (past its
deadline, a member joins the election of the round's diagnoser, invariant 11). How each
store operation is bounded and how its failures are raised is
:mod:`rdzv.rendezvous._round_io`'s (invariants 7 and 9); how a node proposes,
reads and acknowledges the verdict is :mod:`rdzv.rendezvous._verdict`'s; the exit barriers
that follow a join are :mod:`rdzv.rendezvous._exit`'s.

Invariants:

1. A round has exactly one verdict, written with compare_set("", ...) on ``done``; every
   node that waits, waits on that one key, so a fast failure on any node (duplicate rank,
   world-size mismatch, a passed deadline, close, a member that lost its store connection)
   reaches every node at once.
2. ``complete`` is written only once every rank's ``confirmed`` key exists: by the hosting
   node when it arbitrates (invariant 10), else by a node whose ``add`` made ``count``
   reach the world size. Claims are unique per rank, every claimant sets ``confirmed``
   after its ``add``, so a complete round holds exactly the ranks 0..N-1, each counted. (A
   takeover may count a rank twice; ``count`` is only the trigger, the ``confirmed`` keys
   decide.)
3. A node whose own deadline passes tries to write ``aborted``; if ``complete`` won the race
   it returns success instead: the verdict, not the local clock, decides.
4. ``set_closed`` writes ``closed`` and a ``closed`` verdict on the closer's next round, so
   nodes waiting in (or later joining) that round fail with ``RendezvousClosedError``.
5. A node that finds its rank already claimed in a round with a verdict reports that
   (closed run, or a round that completed without it: stale state) instead of joining.
6. Takeover: a node that finds its rank claimed by a process of the same machine (host name
   and machine tag, see :mod:`rdzv.rendezvous._liveness`) that no longer exists -- or, when
   the claimant's pid is this process's own, by a handler of this process that shut down or
   was declared dead -- replaces that claim with compare_set(old identity -> own identity),
   then adds to ``count`` and confirms like any claimant, whether or not its predecessor
   had. A live claimant, another machine, or a round that already has a verdict: a
   duplicate rank, as without takeovers.
7. A member whose store connection breaks mid-join (before its deadline) spends at most
   ``PUBLISH_SECONDS`` on a fresh connection to write an ``aborted`` verdict (reason
   ``connection_lost``) naming itself and the cause, so the others fail at once with
   ``RendezvousConnectionError`` instead of at their deadline. If that fails too, it still
   raises its own error.
8. If the connection that wrote a claim closes before the round has a verdict and no
   restarted process takes the claim over (invariant 6) within ``MEMBER_GRACE``, the
   hosting node writes an ``aborted`` verdict (reason ``member_lost``) naming the rank
   (:mod:`rdzv.rendezvous._lost_member`; the store server follows every key's writer from
   its first request, so no claim is written before it is followed); a member whose round
   completed is the exit barrier's business.
9. A join outlives its deadline by at most ``OVERSHOOT``: past it, naming the missing ranks
   and publishing the verdict get what is left, and a connection that ends then is a
   timeout, never published as lost. A member that finds its time spent
   before it read any verdict (its wait ended late) reads the one that exists, within
   ``LATE_READ`` of that moment; only if there is none are the ranks "not determined",
   and it writes that verdict itself (within ``PROPOSE_BOUND``), so that the round cannot
   complete later without it.
   Figures count from ``started``, never below the timeout when that deadline is what passed.
10. A round never completes while one of its claims belongs to a connection that closed
   and was not taken over. A hosting node that runs the store server in-process (it sees
   connections close) arbitrates: it sets ``arbiter`` before its own ``add`` and
   ``confirmed`` (same connection, so whoever sees every confirmation sees ``arbiter``),
   and it alone writes ``complete``, when its member watch
   (:meth:`rdzv.rendezvous._lost_member.LostMemberWatch.decide`) finds every rank confirmed
   and no claim whose connection closed (such a claim waits for its takeover, or for the
   ``member_lost`` verdict of invariant 8). A node whose ``add`` filled ``count`` completes
   the round itself only when ``arbiter`` is absent once every rank confirmed (a store
   hosted outside the rendezvous); else it waits for the verdict like every member.
11. When deadlines pass, one node names the missing ranks and the others wait for its
   verdict in their one blocking request on ``done`` (:mod:`rdzv.rendezvous._deadline`).
   A hosting node that runs the store server in-process does it first: every member writes
   the seconds left to its deadline at the head of its ``confirmed`` value, the member
   watch turns the earliest into a deadline on the host's clock (never before that
   member's own: the message took time to arrive), and when it passes with a rank missing
   the host proposes the ``timeout`` verdict from the claims and confirmations it saw, with
   no request to ask. Otherwise (no ``arbiter`` when they looked, right after joining)
   only the first ``WATCHMEN`` members to join (``add`` on ``count`` returned at most
   that) wake at their deadline; the first whose ``add`` on
   ``diagnosing`` returns 1 reads ``joined`` and the missing ranks' claims and proposes
   the verdict. Every other member wakes ``LATE_WAKE`` past its deadline (as late as a
   cancelled wait still ends within the overshoot) and holds the same election: elected,
   it names the missing ranks with what is left; else it reads the elected one's verdict
   (within ``LATE_READ``, as a member whose wait ended late does). So when a thousand
   deadlines pass in the same instant, no more than a few members wake.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rdzv.errors import StoreError, StoreTimeoutError
from rdzv.rendezvous import _exit
from rdzv.rendezvous import _round_rules as rules
from rdzv.rendezvous._count import count_and_wait, count_in, read_held
from rdzv.rendezvous._deadline import publish_verdict, timeout_verdict, verdict_grace
from rdzv.rendezvous._liveness import claimant_alive
from rdzv.rendezvous._round_failures import mismatch_message, timeout_message
from rdzv.rendezvous._round_io import RoundIO
from rdzv.rendezvous._round_state import Identity, confirmation
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.rendezvous._takeover import take_over
from rdzv.rendezvous._verdict import RoundVerdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.rendezvous._departures import Departures
    from rdzv.rendezvous._lost_member import LostMemberWatch
    from rdzv.store.base import Store
    from rdzv.store.client import HeldGet

__all__ = ["RoundProtocol"]

_FIRST_POLL: Final = 0.01  # the completing node's first pause between CHECKs, doubling up to
_CONFIRM_POLL: Final = 0.5  # (how often, at most, it looks for every rank or another verdict)


class RoundProtocol:
    """Runs round ``round_index`` of ``cfg.run_id`` for one node over ``store``.

    What it decides is :mod:`rdzv.rendezvous._round_rules`'s; how it uses the store is its
    :class:`~rdzv.rendezvous._round_io.RoundIO`'s (``io``), which it takes the arguments of,
    and:

    Args:
        alive: whether a claimant ``(pid, token)`` of this machine still runs (invariant 6).
        arbiter: the hosting node's member watch, which decides completion (invariant 10);
            None on the other nodes.

    Attributes:
        io: the round's store calls (bounded, translated, reported).
        verdict: this node's part in the round's verdict: proposing, reading and
            acknowledging it (:class:`~rdzv.rendezvous._verdict.RoundVerdict`).
        took_over: the dead predecessor whose claim this node took over, if any.
    """

    def __init__(
        self,
        store: Store,
        cfg: StaticConfig,
        me: Identity,
        round_index: int,
        deadline: float,
        clock: Callable[[], float],
        wall: Callable[[], float],
        reconnect: Callable[[float], Store] | None = None,
        alive: Callable[[int, str], bool] = claimant_alive,
        started: float | None = None,
        arbiter: LostMemberWatch | None = None,
    ) -> None:
        self.io = RoundIO(store, cfg, me, round_index, deadline, clock, wall, reconnect, started)
        self.store, self.cfg, self.me, self.round = store, cfg, me, round_index
        self.deadline, self.clock, self.wall = deadline, clock, wall
        self.keys, self.where = self.io.keys, self.io.where
        self.call, self.event, self.fail = self.io.call, self.io.event, self.io.fail
        self.alive = alive
        self.arbiter = arbiter
        self.took_over: Identity | None = None
        self.verdict = RoundVerdict(self.io)
        self.watchman = True  # one of the first members to join (invariant 11)

    @property
    def reason(self) -> str | None:
        """The reason of the failed verdict this node raised (``member_lost``, ...)."""
        return self.verdict.reason

    @property
    def connection_lost(self) -> bool:
        """This node's own store connection broke (see ``RoundIO.connection_lost``)."""
        return self.io.connection_lost

    def join(self, step: Callable[[], None] | None = None) -> None:
        """Join the round and return once it is complete with every rank (``step``: the
        join from a later step on, where the express hands over,
        :mod:`rdzv.rendezvous._express`).

        Raises:
            RendezvousClosedError: the rendezvous was closed (before or during the round).
            RendezvousStateError: duplicate rank, world-size mismatch, or a round that
                already ended (stale state).
            RendezvousTimeoutError: the deadline passed (here or on another node); the
                message names how many joined, the missing ranks and the time waited.
            RendezvousConnectionError: the store connection failed or the store vanished
                (here, or on another member, which reported it in the verdict).
        """
        self.io.joining = True
        try:
            (step or self.join_general)()
        finally:
            self.io.joining = False

    def join_general(self) -> None:
        """The join, every step through the general code (the express hands over to it)."""
        k, me = self.round, self.me
        first_key, claim_key = self.keys.of(k, "first"), self.keys.claim(k, me.rank)
        self.after_claims(*self._first_and_claim(first_key, claim_key))

    def after_claims(self, raw_first: bytes, raw_holder: bytes) -> None:
        """The join from the replies to the claims on ``first`` (``raw_first``) and on this
        rank (``raw_holder``) on: the checks, then counting in (where the express hands
        over, :mod:`rdzv.rendezvous._express`, as from the general claims)."""
        k, me = self.round, self.me
        first_key, claim_key = self.keys.of(k, "first"), self.keys.claim(k, me.rank)
        if raw_first != me.raw and not Identity.of_world_size(raw_first, me.world_size):
            first = Identity.decode(raw_first, first_key)
            if not rules.world_sizes_agree(me.world_size, first.world_size):
                message = mismatch_message(self.where, me, first)
                self.verdict.reject("world_size_mismatch", message, claimed=raw_holder == me.raw)
        if raw_holder != me.raw:
            take_over(self, claim_key, raw_holder)
        if self.arbiter is not None:  # before this node's confirmation (invariant 10)
            self.call(self.store.set, self.keys.of(k, "arbiter"), me.raw)
        count, confirmed = self.keys.of(k, "count"), self.keys.confirmed(k, me.rank)
        # invariant 11: the seconds left, and the deadline itself on the machine's clock
        at = self.deadline if self.clock is time.monotonic else None
        due = confirmation(self.deadline - self.clock(), at, me)
        # ``joined``: the list a timeout diagnosis reads in one GET (a write with no reply).
        append = (self.keys.of(k, "joined"), f"{me.rank},")
        held = None
        counted = count_and_wait(self.io, self.arbiter is not None, count, confirmed, due, append)
        if counted is not None:  # the verdict's WAIT+GET went in the same write
            joined, arbitrated, held = counted
        else:
            joined, arbitrated = count_in(self.io, count, confirmed, due, append), None
        self.after_joining(joined, arbitrated, held)

    def after_joining(self, joined: int, arbitrated: bool | None, held: HeldGet | None) -> None:
        """Counted in as the ``joined``-th: decide, complete or wait for the verdict
        (``arbitrated``: whether ``arbiter`` was set when this node counted itself, None
        when not asked; ``held``: the verdict's read, already sent, ended here either way)."""
        try:
            self._after_joining(joined, arbitrated, held)
        finally:
            if held is not None:
                held.release()  # a wait nothing ended is cancelled

    def _after_joining(self, joined: int, arbitrated: bool | None, held: HeldGet | None) -> None:
        world_size = self.me.world_size
        hosts = self.arbiter is not None
        watchman = rules.watches_once_counted(joined, world_size, hosts, arbitrated)
        self.watchman = not self._arbitrated() if watchman is None else watchman
        self.event("joined", joined=min(joined, world_size), world_size=world_size)
        route = rules.after_joining(joined, world_size, hosts, arbitrated)
        if route == "decide" and self.arbiter is not None:
            self._decide(self.arbiter)
        elif route == "complete_when_confirmed":
            if held is not None:  # the connection is needed: end the wait first
                raw = read_held(self.io, held, None)
                if raw is not None:  # a verdict came first
                    self.verdict.act_on(raw)
                    return
            self._complete_when_confirmed()
        else:
            self._await_verdict(held)

    def _first_and_claim(self, first_key: str, claim_key: str) -> tuple[bytes, bytes]:
        """compare_set("", own identity) on ``first`` and on this rank's claim: the world
        size of the round's first node, and who holds the claim. In one write and one round
        trip where the store allows it (a node whose world size turns out wrong has then
        claimed its rank too: it rejects the round at once, and a node that finds its rank
        held by a claimant of another world size rejects it the same way, see
        :func:`rdzv.rendezvous._takeover.take_over`)."""
        raw = self.me.raw
        compare_sets = getattr(self.store, "compare_sets", None)
        if callable(compare_sets):
            pair = [(first_key, "", raw), (claim_key, "", raw)]
            raw_first, raw_holder = self.call(compare_sets, pair, name="compare_set")
            return raw_first, raw_holder
        raw_first = self.call(self.store.compare_set, first_key, "", raw)
        first = self.me if raw_first == raw else Identity.decode(raw_first, first_key)
        if not rules.world_sizes_agree(self.me.world_size, first.world_size):
            return raw_first, b""  # rejected by the caller before it claims: no claim
        return raw_first, self.call(self.store.compare_set, claim_key, "", raw)

    def _arbitrated(self) -> bool:
        """Whether the hosting node decides this round (its ``arbiter`` key is set; invariant
        10); False as well when the store cannot say before the deadline."""
        if (left := self.deadline - self.clock()) <= 0:
            return False
        try:
            self.store.set_timeout(left)
            return bool(self.store.check([self.keys.of(self.round, "arbiter")]))
        except StoreError:
            return False

    def _decide(self, arbiter: LostMemberWatch) -> None:
        """As the hosting node: complete the round once the member watch allows it
        (invariant 10), or act on the verdict another node wrote, or on the deadline."""
        outcome = arbiter.decide(self.round, self.me.world_size, self.deadline, self.clock)
        if outcome == "complete":
            self.verdict.settle({"status": "complete", "by": self.me.as_dict(), "at": self.wall()})
        elif outcome == "verdict":
            self.verdict.act_on(self.call(self.store.get, self.keys.of(self.round, "done")))
        elif outcome == "member_deadline":  # invariant 11: named at once, from what it saw
            confirmed, claimed, rank = arbiter.members(self.round)
            waited, where = self.io.waited(), self.where
            message = timeout_message(self.cfg, where, waited, confirmed, claimed, for_rank=rank)
            self.event("diagnosing", for_rank=rank)
            # by its hard end, not its deadline
            self.verdict.act_on(publish_verdict(self.io, message))
        elif outcome == "closed":  # this node is leaving: the store decides how this ends
            self._await_verdict()
        else:
            self.on_deadline()

    def _complete_when_confirmed(self) -> None:
        """As the node whose add reached the world size: complete the round once every rank
        confirmed (invariant 2) and no hosting node arbitrates (invariant 10), unless another
        verdict comes first or the deadline passes.

        Polls with CHECK (backing off to ``_CONFIRM_POLL``): a short WAIT would need a
        CANCEL_WAIT answered in time each round, which a slow link cannot give.
        """
        confirmations = [self.keys.confirmed(self.round, r) for r in range(self.me.world_size)]
        done, arbiter = self.keys.of(self.round, "done"), self.keys.of(self.round, "arbiter")
        pause = _FIRST_POLL
        while True:
            every_rank = bool(self.call(self.store.check, confirmations))
            # the arbiter matters only once every rank confirmed (a CHECK fewer before)
            hosted = every_rank and bool(self.call(self.store.check, [arbiter]))
            completes = rules.completes(every_rank, hosted)
            if completes:
                self.verdict.settle(
                    {"status": "complete", "by": self.me.as_dict(), "at": self.wall()}
                )
                return
            if completes is False:  # the host decides (invariant 10)
                self._await_verdict()
                return
            if self.call(self.store.check, [done]):
                self.verdict.act_on(self.call(self.store.get, done))
                return
            if (remaining := self.deadline - self.clock()) <= 0:
                break
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _CONFIRM_POLL)
        self.on_deadline()

    def _await_verdict(self, held: HeldGet | None = None) -> None:
        """Block (bounded by the deadline; a member that does not watch it, invariant 11:
        by ``WAIT_FOR_DIAGNOSER`` past it) until the round's verdict exists; act on it.
        ``held``: the WAIT+GET already went out."""
        done = self.keys.of(self.round, "done")
        remaining = self.deadline + verdict_grace(self.watchman) - self.clock()
        try:
            if held is not None:  # a verdict already there is read even past the deadline
                raw = read_held(self.io, held, max(remaining, 0.0))
            elif remaining <= 0:
                raise StoreTimeoutError(f"join deadline of {self.where} passed before waiting")
            else:
                self.store.set_timeout(remaining)
                raw = self.store.get(done)  # one round trip: WAIT + GET
        except StoreTimeoutError:
            self.on_deadline()
            return
        except StoreError as exc:
            self.io.raise_store(exc, "waiting for the other nodes")
        assert raw is not None
        self.verdict.act_on(raw)

    def on_deadline(self) -> None:
        """The deadline passed: act on the round's timeout verdict, named by one elected
        member (invariant 11); a complete verdict that won the race still wins."""
        self.verdict.act_on(timeout_verdict(self.io, self.watchman))

    def wait_for_readers(self, timeout: float, departures: Departures | None = None) -> None:
        """Exit barrier of the hosting node whose round completed: return once every node
        read the verdict or is gone (see :func:`rdzv.rendezvous._exit.wait_for_readers`).

        Raises:
            RendezvousConnectionError: the store connection failed.
        """
        _exit.wait_for_readers(self.io, timeout, departures)

    def linger(self, timeout: float) -> None:
        """Exit barrier of a hosting node whose round failed (see
        :func:`rdzv.rendezvous._exit.linger`): best effort, bounded by ``timeout`` seconds;
        never raises a store error."""
        keys, world_size = self.keys, self.me.world_size
        error = _exit.linger(self.store, keys, self.round, world_size, timeout, self.clock)
        if error is not None:
            self.event("linger_ended", error=error)
