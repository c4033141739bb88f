"""The static join protocol: one round of a fixed-size rendezvous over a shared store.

The keys it uses are described in :mod:`rdzv._round_state`. A member's happy path costs four
round trips after connecting: compare_set(first), compare_set(claim), add(count), get(done)
(a blocking WAIT+GET); set(confirmed) and the ack are one-way messages, and the node that
completes the round spends one more (a WAIT for every rank's confirmation). Failure paths may
spend more (a timed-out node checks every claim to name the missing ranks).

Invariants:

1. A round has exactly one verdict, written with compare_set("", ...) on ``done``; every
   node that waits, waits on that one key, so a fast failure on any node (duplicate rank,
   world-size mismatch, a passed deadline, close, a member that lost its store connection)
   reaches every node at once.
2. ``complete`` is written only by a node whose ``add`` made ``count`` reach the world size,
   and only once every rank's ``confirmed`` key exists. Claims are unique per rank, every
   claimant sets ``confirmed`` after its ``add``, so a complete round holds exactly the ranks
   0..N-1, each counted. (A takeover may count a rank twice; ``count`` is only the trigger,
   the ``confirmed`` keys decide.)
3. A node whose own deadline passes tries to write ``aborted``; if ``complete`` won the race
   it returns success instead: the verdict, not the local clock, decides.
4. ``set_closed`` writes ``closed`` and a ``closed`` verdict on the closer's next round, so
   nodes waiting in (or later joining) that round fail with ``RendezvousClosedError``.
5. A node that finds its rank already claimed in a round with a verdict reports that
   (closed run, or a round that completed without it: stale state) instead of joining.
6. Takeover: a node that finds its rank claimed by a process of the same machine (host name
   and machine tag, see :mod:`rdzv._liveness`) that no longer exists replaces that claim
   with compare_set(old identity -> own identity), then adds to ``count`` and confirms like
   any claimant, whether or not its predecessor had. A live claimant, another machine, or a
   round that already has a verdict: a duplicate rank, as without takeovers.
7. A member whose store connection breaks mid-join (before its deadline) spends at most
   ``_PUBLISH_SECONDS`` on a fresh connection to write an ``aborted`` verdict (reason
   ``connection_lost``) naming itself and the cause, so the others fail at once with
   ``RendezvousConnectionError`` instead of at their deadline. If that fails too, it still
   raises its own error.
8. If the connection that wrote a claim closes before the round has a verdict and no
   restarted process takes the claim over (invariant 6) within ``MEMBER_GRACE``, the
   hosting node writes an ``aborted`` verdict (reason ``member_lost``) naming the rank
   (:mod:`rdzv._lost_member`); a member whose round completed is the exit barrier's business.
9. A join outlives its deadline by at most ``_OVERSHOOT``: past it, naming the missing ranks
   and publishing the verdict get what is left (else the ranks are "not determined"), and a
   connection that ends then is a timeout, never published as lost. Figures count from
   ``started``, never below the timeout when that deadline is what passed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final, NoReturn

from rdzv._exit import linger, publish
from rdzv._liveness import process_alive
from rdzv._round_failures import (
    after_deadline_failure,
    closed_message,
    duplicate_message,
    format_waited,
    lost_connection_message,
    mismatch_message,
    stale_message,
    store_failure,
    timeout_message,
    unread_message,
)
from rdzv._round_state import Identity, RoundKeys, decode_verdict
from rdzv._static_config import StaticConfig
from rdzv.errors import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousStateError,
    RendezvousTimeoutError,
    StoreConnectionError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)
from rdzv.events import emit

if TYPE_CHECKING:
    from rdzv.store import Store

__all__ = ["RoundProtocol"]

_log: Final = logging.getLogger("rdzv.rendezvous")
_MIN_OP_SECONDS: Final = 0.05
_OVERSHOOT: Final = 0.5  # how long a join may outlive its deadline (invariant 9)
_VERDICT_RESERVE: Final = 0.2  # of the overshoot, kept for publishing the timeout verdict
_PUBLISH_SECONDS: Final = 1.0  # bound of the fresh connection that reports a lost one
_FIRST_POLL: Final = 0.01  # the completing node's first pause between CHECKs, doubling up to
_CONFIRM_POLL: Final = 0.5  # (how often, at most, it looks for every rank or another verdict)
_MAX_TAKEOVERS: Final = 8  # restarted incarnations racing for one claim
_ERROR_BY_REASON: Final[dict[str, type[RendezvousError]]] = {
    "duplicate_rank": RendezvousStateError,
    "world_size_mismatch": RendezvousStateError,
    "timeout": RendezvousTimeoutError,
    "connection_lost": RendezvousConnectionError,
    "member_lost": RendezvousConnectionError,
}


def _msg(*parts: str) -> str:
    return " ".join(parts)


class RoundProtocol:
    """Runs round ``round_index`` of ``cfg.run_id`` for one node over ``store``.

    Args:
        store: the raw store (not prefixed) every node shares.
        cfg: this node's validated settings.
        me: this node's identity.
        round_index: which round (the n-th ``next_rendezvous`` call of this handler).
        deadline: monotonic time by which the round must have completed.
        clock: the monotonic clock ``deadline`` refers to.
        wall: a wall clock (seconds since the epoch) for timestamps in verdicts.
        reconnect: opens a fresh connection to the same store within the given seconds
            (invariant 7); None: a lost connection is not reported to the others.
        alive: whether a pid of this machine still runs (invariant 6).
        started: where the deadline started (``clock`` time; the caller computed the
            deadline from it before connecting): what every "after X s" counts from.
            Default: now.

    Attributes:
        connection_lost: this node's own store connection broke (as opposed to a verdict
            that reports another node's broken connection).
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
        alive: Callable[[int], bool] = process_alive,
        started: float | None = None,
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.me = me
        self.round = round_index
        self.deadline = deadline
        self.clock = clock
        self.wall = wall
        self.reconnect = reconnect
        self.alive = alive
        self.started = clock() if started is None else started
        self.hard_end = deadline + _OVERSHOOT
        self.keys = RoundKeys(cfg.run_id)
        self.connection_lost = False
        self.took_over: Identity | None = None
        self._joining = False
        self._read_verdict = False
        self._where = f"round {round_index} of run '{cfg.run_id}' at {cfg.endpoint}"

    # -- the join -------------------------------------------------------------------------

    def join(self) -> None:
        """Join the round and return once it is complete with every rank.

        Raises:
            RendezvousClosedError: the rendezvous was closed (before or during the round).
            RendezvousStateError: duplicate rank, world-size mismatch, or a round that
                already ended (stale state).
            RendezvousTimeoutError: the deadline passed (here or on another node); the
                message names how many joined, the missing ranks and the time waited.
            RendezvousConnectionError: the store connection failed or the store vanished
                (here, or on another member, which reported it in the verdict).
        """
        self._joining = True
        try:
            self._join()
        finally:
            self._joining = False

    def _join(self) -> None:
        k, me = self.round, self.me
        first_key = self.keys.of(k, "first")
        raw_first = self._call(self.store.compare_set, first_key, "", me.raw)
        first = me if raw_first == me.raw else Identity.decode(raw_first, first_key)
        if first.world_size != me.world_size:
            self._reject("world_size_mismatch", mismatch_message(self._where, me, first))
        claim_key = self.keys.claim(k, me.rank)
        raw_holder = self._call(self.store.compare_set, claim_key, "", me.raw)
        if raw_holder != me.raw:
            self._take_over(claim_key, raw_holder)
        joined = self._call(self.store.add, self.keys.of(k, "count"), 1)
        self._call(self.store.set, self.keys.confirmed(k, me.rank), me.raw)
        self._event("joined", joined=min(joined, me.world_size), world_size=me.world_size)
        if joined >= me.world_size:
            self._complete_when_confirmed()
        else:
            self._await_verdict()

    def _take_over(self, claim_key: str, raw: bytes) -> None:
        """Replace the claim ``raw`` of a dead predecessor by this node's (invariant 6)."""
        done = self.keys.of(self.round, "done")
        for _ in range(_MAX_TAKEOVERS):
            holder = Identity.decode(raw, claim_key)
            if not self.me.same_machine(holder) or self.alive(holder.pid):
                break
            if self._call(self.store.check, [done]):  # a finished round is not rejoined
                self._refuse(self._call(self.store.get, done))
            raw = self._call(self.store.compare_set, claim_key, raw, self.me.raw)
            if raw == self.me.raw:
                self.took_over = holder
                self._event(
                    "claim_taken_over",
                    logging.WARNING,
                    previous=holder.describe(),
                    previous_pid=holder.pid,
                    host=holder.host,
                )
                return
        holder = Identity.decode(raw, claim_key)
        self._reject("duplicate_rank", duplicate_message(self._where, holder, self.me))

    def _complete_when_confirmed(self) -> None:
        """As the node whose add reached the world size: complete the round once every rank
        confirmed (invariant 2), unless another verdict comes first or the deadline passes.

        Polls with CHECK (backing off to ``_CONFIRM_POLL``): a short WAIT would need a
        CANCEL_WAIT answered in time each round, which a slow link cannot give.
        """
        confirmations = [self.keys.confirmed(self.round, r) for r in range(self.me.world_size)]
        done = self.keys.of(self.round, "done")
        pause = _FIRST_POLL
        while True:
            if self._call(self.store.check, confirmations):
                self._settle({"status": "complete", "by": asdict(self.me), "at": self.wall()})
                return
            if self._call(self.store.check, [done]):
                self._act_on(self._call(self.store.get, done))
                return
            if (remaining := self.deadline - self.clock()) <= 0:
                break
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _CONFIRM_POLL)
        self._on_deadline()

    def _await_verdict(self) -> None:
        """Block (bounded by the deadline) until the round's verdict exists; act on it."""
        done = self.keys.of(self.round, "done")
        remaining = self.deadline - self.clock()
        try:
            if remaining <= 0:
                raise StoreTimeoutError(f"join deadline of {self._where} passed before waiting")
            self.store.set_timeout(remaining)
            raw = self.store.get(done)  # one round trip: WAIT + GET
        except StoreTimeoutError:
            self._on_deadline()
            return
        except StoreError as exc:
            self._raise_store(exc, "waiting for the other nodes")
        self._act_on(raw)

    def _on_deadline(self) -> None:
        """The deadline passed: name the missing ranks and publish that, within what is left
        of the overshoot (invariant 9); a complete verdict that won the race still wins."""
        confirmed, claimed, unknown = self._diagnose()
        waited = self._waited()
        message = timeout_message(self.cfg, self._where, waited, confirmed, claimed, unknown)
        encoded = json.dumps(self._verdict("timeout", message), sort_keys=True).encode()
        try:
            if self.hard_end - self.clock() <= 0:
                raise StoreTimeoutError("no time was left to publish the verdict")
            self.store.set_timeout(self.hard_end - self.clock())
            raw = self.store.compare_set(self.keys.of(self.round, "done"), "", encoded)
        except StoreError as exc:  # the others learn it at their own deadline
            self._event("failure_not_published", error=f"{type(exc).__name__}: {exc}")
            self._fail(RendezvousTimeoutError(message))
        self._act_on(raw)

    def _diagnose(self) -> tuple[list[int] | None, list[int], str]:
        """Which ranks confirmed, which only claimed, before ``hard_end`` minus the time kept
        for the verdict; ``(None, [], why)`` when the store could not tell in time."""
        k, until = self.round, self.hard_end - _VERDICT_RESERVE
        confirmed: list[int] = []
        claimed: list[int] = []
        try:
            for rank in range(self.me.world_size):
                for key, into in (
                    (self.keys.confirmed(k, rank), confirmed),
                    (self.keys.claim(k, rank), claimed),
                ):
                    if (left := until - self.clock()) <= 0:
                        return None, [], "no time was left to ask the store"
                    self.store.set_timeout(left)
                    if self.store.check([key]):
                        into.append(rank)
                        break
        except StoreTimeoutError:
            return None, [], "the store did not answer in time"
        except StoreError as exc:
            return None, [], f"the store could not be asked: {exc}"
        return confirmed, claimed, ""

    def _verdict(self, reason: str, message: str) -> dict[str, Any]:
        return {
            "status": "aborted",
            "reason": reason,
            "message": message,
            "by": asdict(self.me),
            "at": self.wall(),
        }

    def _reject(self, reason: str, message: str) -> NoReturn:
        """Abort the round from a node that is not (and will not be) a member of it."""
        done = self.keys.of(self.round, "done")
        encoded = json.dumps(self._verdict(reason, message), sort_keys=True).encode()
        self._refuse(self._call(self.store.compare_set, done, "", encoded))

    def _refuse(self, raw: bytes) -> NoReturn:
        """As a non-member: raise what the round's verdict ``raw`` means for this node."""
        if decode_verdict(raw, self.keys.of(self.round, "done"))["status"] == "complete":
            if self._call(self.store.check, [self.keys.closed]):
                self._raise_closed(self._call(self.store.get, self.keys.closed))
            self._raise_stale()
        self._raise_verdict(raw)

    def _settle(self, proposal: dict[str, Any]) -> None:
        """As a member: propose a verdict; return if the winning verdict is complete."""
        done = self.keys.of(self.round, "done")
        encoded = json.dumps(proposal, sort_keys=True).encode()
        self._act_on(self._call(self.store.compare_set, done, "", encoded))

    def _act_on(self, raw: bytes) -> None:
        """As a member: return if ``raw`` is a complete verdict, else raise what it says.

        Either way the member first acknowledges that it read the verdict: the hosting node
        keeps the store up until its members have (see :meth:`wait_for_readers`,
        :meth:`linger`), so a verdict that ends the round reaches every member.
        """
        self._read_verdict = True
        if decode_verdict(raw, self.keys.of(self.round, "done"))["status"] != "complete":
            with contextlib.suppress(RendezvousError):  # the verdict matters, not the ack
                self._acknowledge()
            self._raise_verdict(raw)
        self._acknowledge()
        self._event("complete", world_size=self.me.world_size)

    def _raise_verdict(self, raw: bytes) -> NoReturn:
        """Raise the error an aborted or closed verdict stands for."""
        verdict = decode_verdict(raw, self.keys.of(self.round, "done"))
        if verdict["status"] == "closed":
            self._raise_closed(raw)
        by = Identity(**verdict["by"])
        error = _ERROR_BY_REASON.get(verdict.get("reason", ""), RendezvousStateError)
        message = str(verdict.get("message", "the round was aborted"))
        if by != self.me:
            message = _msg(
                message,
                f"[reported by {by.describe()}; this node, {self.me.describe()},",
                f"waited {format_waited(self._waited())} s]",
            )
        self._fail(error(message))

    def _acknowledge(self) -> None:
        self._call(self.store.set, self.keys.of(self.round, f"ack/{self.me.rank}"), b"1")

    def wait_for_readers(self, timeout: float) -> None:
        """Exit barrier of the hosting node: return once every node read the verdict.

        Raises:
            RendezvousTimeoutError: some ranks did not read it within ``timeout`` seconds.
            RendezvousConnectionError: the store connection failed.
        """
        acks = [self.keys.of(self.round, f"ack/{rank}") for rank in range(self.me.world_size)]
        try:
            self.store.wait(acks, timeout)
        except StoreTimeoutError:
            missing = [r for r, key in enumerate(acks) if not self._call(self.store.check, [key])]
            self._fail(RendezvousTimeoutError(unread_message(self._where, missing, timeout)))
        except StoreError as exc:
            self._raise_store(exc, "waiting for every node to read the result")

    def linger(self, timeout: float) -> None:
        """Exit barrier of a hosting node whose round failed (see :func:`rdzv._exit.linger`):
        best effort, bounded by ``timeout`` seconds; never raises a store error."""
        error = linger(self.store, self.keys, self.round, self.me.world_size, timeout, self.clock)
        if error is not None:
            self._event("linger_ended", error=error)

    # -- failures -------------------------------------------------------------------------

    def _raise_closed(self, raw: bytes) -> NoReturn:
        record = decode_verdict(raw, self.keys.closed)
        by = Identity(**record["by"])
        self._fail(RendezvousClosedError(closed_message(self.cfg, by, self.me, self.round)))

    def _raise_stale(self) -> NoReturn:
        self._fail(RendezvousStateError(stale_message(self._where, self.me)))

    def _raise_store(self, exc: StoreError, doing: str) -> NoReturn:
        passed = self.clock() >= self.deadline
        late = passed and self._joining and not self._read_verdict
        if late and isinstance(exc, StoreConnectionError):
            # Too late to tell the others (invariant 9): they are past their deadline too.
            self.connection_lost = True
            error: RendezvousError = after_deadline_failure(
                self.cfg, self._where, self._waited(), exc
            )
            error.__cause__ = exc
            self._fail(error)
        timeout = self.cfg.join_timeout.total_seconds() if passed else 0.0
        error = store_failure(exc, self.cfg.endpoint, self._where, doing, self._waited(), timeout)
        error.__cause__ = exc
        if isinstance(error, RendezvousConnectionError) and not isinstance(exc, StoreProtocolError):
            self.connection_lost = True
            if self._joining:
                self._publish_lost(doing, exc)
        self._fail(error)

    def _publish_lost(self, doing: str, exc: StoreError) -> None:
        """Best effort, bounded: tell the others, over a fresh connection, that this node
        lost its own (invariant 7). Failures are reported as an event, never raised."""
        budget = min(self.deadline - self.clock(), _PUBLISH_SECONDS)
        if self.reconnect is None or budget <= 0:
            self._event("failure_not_published", error="no time left or no way to reconnect")
            return
        message = lost_connection_message(self._where, self.me, doing, exc)
        encoded = json.dumps(self._verdict("connection_lost", message), sort_keys=True).encode()
        try:
            first = publish(self.reconnect, budget, self.keys.of(self.round, "done"), encoded)
        except StoreError as failure:
            self._event("failure_not_published", error=f"{type(failure).__name__}: {failure}")
            return
        self._event("failure_published", first=first)

    def _fail(self, error: RendezvousError) -> NoReturn:
        self._event("failed", error=type(error).__name__, message=str(error))
        raise error

    # -- helpers --------------------------------------------------------------------------

    def _waited(self) -> float:
        return self.clock() - self.started

    def _call(self, op: Callable[..., Any], *args: Any) -> Any:
        """Run one store operation bounded by the deadline (past it: by the overshoot,
        invariant 9); translate store errors."""
        now = self.clock()
        end = self.deadline if now < self.deadline else self.hard_end
        remaining = max(end - now, _MIN_OP_SECONDS)
        try:
            self.store.set_timeout(remaining)
            return op(*args)
        except StoreError as exc:
            self._raise_store(exc, f"calling {getattr(op, '__name__', 'a store operation')}")

    def _event(self, name: str, level: int = logging.INFO, **fields: Any) -> None:
        if _log.isEnabledFor(level):  # skip building the fields when nobody listens
            emit(_log, name, level, **self._fields(), **fields)

    def _fields(self) -> dict[str, Any]:
        return {
            "run_id": self.cfg.run_id,
            "round": self.round,
            "rank": self.me.rank,
            "endpoint": self.cfg.endpoint,
            "elapsed": round(self._waited(), 6),
        }
