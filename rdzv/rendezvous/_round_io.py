"""How one node uses the store during one round: bounded, translated, reported.

:class:`RoundIO` is what the join (:class:`rdzv.rendezvous._join.RoundProtocol`, which holds
one as ``io``), the deadline's diagnosis (:mod:`rdzv.rendezvous._deadline`) and the hosting
node's exit barrier (:func:`rdzv.rendezvous._exit.wait_for_readers`) share; it decides
nothing about the round (:mod:`rdzv.rendezvous._round_rules` does). It keeps two invariants
of :mod:`rdzv.rendezvous._join`:

* 7: a member whose store connection breaks mid-join (before its deadline) spends at most
  ``PUBLISH_SECONDS`` on a fresh connection to write an ``aborted`` verdict (reason
  ``connection_lost``) naming itself and the cause; if that fails too, it still raises its
  own error.
* 9: every store operation is bounded by the join deadline, and past it by what is left of
  ``OVERSHOOT``; a connection that ends then is a timeout, never published as lost.
  Figures count from ``started``, never below the timeout when that deadline is what passed.

Every failure is reported (event ``failed``) before it is raised.
"""

from __future__ import annotations

from collections.abc import Callable

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousError,
    StoreConnectionError,
    StoreError,
    StoreProtocolError,
)
from rdzv.events import INFO, emit, get_logger
from rdzv.rendezvous._connection import publish
from rdzv.rendezvous._round_failures import (
    after_deadline_failure,
    lost_connection_message,
    store_failure,
)
from rdzv.rendezvous._round_rules import publishes_loss
from rdzv.rendezvous._round_state import Identity, RoundKeys, encode_verdict
from rdzv.rendezvous._static_config import StaticConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, NoReturn

    from rdzv.store.base import Store

__all__ = ["OVERSHOOT", "PUBLISH_SECONDS", "RoundIO", "call_bound"]

_log: Final = get_logger("rdzv.rendezvous")
_MIN_OP_SECONDS: Final = 0.05
#: How long a join may outlive its deadline (invariant 9; rdzv.rendezvous._deadline). Past
#: its deadline a watchman waits up to 8.4 s for the node that names the missing ranks, the
#: others 8.6 s for the verdict, then cancel that wait -- the rdzv client allows the store
#: 0.4 s to answer a cancel -- and a watchman keeps 0.2 s for its own verdict. A member
#: whose verdict comes returns at once: only a round nobody diagnoses costs the whole
#: overshoot. The waits are long because a wait costs nothing and a verdict can be slow to
#: come: with two 1024-node runs, four CPU hogs and other tests on 2 cores, node 0's verdict
#: reached the last of a thousand members 5.7 s after it was written, and a watchman's ADD
#: on ``diagnosing`` went unanswered for 2.8 s. A member whose wait ends before the verdict
#: comes cancels it, and when that cancel is not answered in 0.4 s the client closes the
#: connection: the verdict can then only be read over a new one, which such a store may not
#: give it in time. 1 s (then 3 s) of overshoot left most (then 7) of a thousand members
#: saying the missing ranks "could not be determined"; 0.5 s once fit only the cancel.
OVERSHOOT: Final = 9.0
#: Bound of the fresh connection that reports a lost one (invariant 7).
PUBLISH_SECONDS: Final = 1.0


def call_bound(deadline: float, now: float) -> float:
    """Seconds one store call may take at ``now`` in a join whose deadline is ``deadline``
    (invariant 9): what is left of it, and past it what is left of the overshoot; never
    less than a minimal bound."""
    end = deadline if now < deadline else deadline + OVERSHOOT
    return max(end - now, _MIN_OP_SECONDS)


class RoundIO:
    """Round ``round_index`` of ``cfg.run_id`` as one node sees it: the store, the deadline,
    and how store operations are bounded, failures raised and events reported.

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
        started: where the deadline started (``clock`` time; the caller computed the
            deadline from it before connecting): what every "after X s" counts from.
            Default: now.

    Attributes:
        connection_lost: this node's own store connection broke (as opposed to a verdict
            that reports another node's broken connection).
        where: "round k of run 'x' at host:port", as messages name the round.
        joining: inside the join (not its exit barrier): a lost connection is published.
        read_verdict: this node read the round's verdict.
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
        self.started = clock() if started is None else started
        self.hard_end = deadline + OVERSHOOT
        self.keys = RoundKeys(cfg.run_id)
        self.connection_lost = False
        self.where = f"round {round_index} of run '{cfg.run_id}' at {cfg.endpoint}"
        self.joining = False  # inside the join (not its exit barrier)
        self.read_verdict = False  # this node read the round's verdict

    def call(self, op: Callable[..., Any], *args: Any, name: str | None = None) -> Any:
        """Run one store operation bounded by the deadline (past it: by the overshoot,
        invariant 9); translate store errors (see :meth:`raise_store`), naming the
        operation ``name`` (default: ``op``'s name)."""
        try:
            self.store.set_timeout(call_bound(self.deadline, self.clock()))
            return op(*args)
        except StoreError as exc:
            name = name or getattr(op, "__name__", "a store operation")
            self.raise_store(exc, f"calling {name}")

    def raise_store(self, exc: StoreError, doing: str) -> NoReturn:
        """Raise the rendezvous error a store failure while ``doing`` stands for; a broken
        connection mid-join is first published to the others (invariant 7).

        Raises:
            RendezvousTimeoutError: the store did not answer in time, or the connection
                ended past the join deadline.
            RendezvousConnectionError: the connection broke, or the peer is not a store.
        """
        passed = self.clock() >= self.deadline
        late = passed and self.joining and not self.read_verdict
        if late and isinstance(exc, StoreConnectionError):
            # Too late to tell the others (invariant 9): they are past their deadline too.
            self.connection_lost = True
            error: RendezvousError = after_deadline_failure(
                self.cfg, self.where, self.waited(), exc
            )
            error.__cause__ = exc
            self.fail(error)
        timeout = self.cfg.join_timeout.total_seconds() if passed else 0.0
        error = store_failure(exc, self.cfg.endpoint, self.where, doing, self.waited(), timeout)
        error.__cause__ = exc
        if isinstance(error, RendezvousConnectionError) and not isinstance(exc, StoreProtocolError):
            self.connection_lost = True
            if self.joining:
                self._publish_lost(doing, exc)
        self.fail(error)

    def _publish_lost(self, doing: str, exc: StoreError) -> None:
        """Best effort, bounded: tell the others, over a fresh connection, that this node
        lost its own (invariant 7). Failures are reported as an event, never raised."""
        budget = min(self.deadline - self.clock(), PUBLISH_SECONDS)
        if self.reconnect is None or not publishes_loss(self.joining, budget):
            self.event("failure_not_published", error="no time left or no way to reconnect")
            return
        message = lost_connection_message(self.where, self.me, doing, exc)
        encoded = encode_verdict(self.aborted("connection_lost", message))
        try:
            first = publish(self.reconnect, budget, self.keys.of(self.round, "done"), encoded)
        except StoreError as failure:
            self.event("failure_not_published", error=f"{type(failure).__name__}: {failure}")
            return
        self.event("failure_published", first=first)

    def aborted(self, reason: str, message: str) -> dict[str, Any]:
        """An ``aborted`` verdict written by this node."""
        return {
            "status": "aborted",
            "reason": reason,
            "message": message,
            "by": self.me.as_dict(),
            "at": self.wall(),
        }

    def fail(self, error: RendezvousError) -> NoReturn:
        """Report ``error`` (event ``failed``), then raise it."""
        self.event("failed", error=type(error).__name__, message=str(error))
        raise error

    def waited(self) -> float:
        """Seconds since the join deadline started."""
        return self.clock() - self.started

    def event(self, name: str, level: int = INFO, **fields: Any) -> None:
        """Emit event ``name`` with this round's fields (see :mod:`rdzv.events`)."""
        if _log.isEnabledFor(level):  # skip building the fields when nobody listens
            emit(_log, name, level, **self._fields(), **fields)

    def _fields(self) -> dict[str, Any]:
        return {
            "run_id": self.cfg.run_id,
            "round": self.round,
            "rank": self.me.rank,
            "endpoint": self.cfg.endpoint,
            "elapsed": round(self.waited(), 6),
        }
