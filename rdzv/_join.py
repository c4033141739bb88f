"""The static join protocol: one round of a fixed-size rendezvous over a shared store.

The keys it uses are described in :mod:`rdzv._round_state`. A member's happy path costs four
round trips after connecting: compare_set(first), compare_set(claim), add(count), get(done)
(a blocking WAIT+GET); the ack is a one-way message. Failure paths may spend more (a
timed-out node checks every claim to name the missing ranks).

Invariants:

1. A round has exactly one verdict, written with compare_set("", ...) on ``done``; every
   node that waits, waits on that one key, so a fast failure on any node (duplicate rank,
   world-size mismatch, a passed deadline, close) reaches every node at once.
2. ``complete`` is written only by the node whose ``add`` made ``count`` reach the world
   size; only successful claimants count, and claims are unique per rank, so a complete
   round holds exactly the ranks 0..N-1.
3. A node whose own deadline passes tries to write ``aborted``; if ``complete`` won the race
   it returns success instead: the verdict, not the local clock, decides.
4. ``set_closed`` writes ``closed`` and a ``closed`` verdict on the closer's next round, so
   nodes waiting in (or later joining) that round fail with ``RendezvousClosedError``.
5. A node that finds its rank already claimed in a round with a verdict reports that
   (closed run, or a round that completed without it: stale state) instead of joining.
"""

from __future__ import annotations

import contextlib
import errno as errno_names
import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Final, NoReturn

from rdzv._round_state import Identity, RoundKeys, decode_verdict, format_ranks
from rdzv._static_config import StaticConfig
from rdzv.errors import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousStateError,
    RendezvousTimeoutError,
    StoreBindError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)
from rdzv.events import emit

if TYPE_CHECKING:
    from rdzv.store import Store

__all__ = ["RoundProtocol", "connect_error", "leave"]

_log: Final = logging.getLogger("rdzv.rendezvous")
_MIN_OP_SECONDS: Final = 0.05
_DIAGNOSIS_GRACE: Final = 2.0
_ERROR_BY_REASON: Final[dict[str, type[RendezvousError]]] = {
    "duplicate_rank": RendezvousStateError,
    "world_size_mismatch": RendezvousStateError,
    "timeout": RendezvousTimeoutError,
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
    ) -> None:
        self.store = store
        self.cfg = cfg
        self.me = me
        self.round = round_index
        self.deadline = deadline
        self.clock = clock
        self.wall = wall
        self.started = clock()
        self.keys = RoundKeys(cfg.run_id)
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
            RendezvousConnectionError: the store connection failed or the store vanished.
        """
        k, me = self.round, self.me
        first_key = self.keys.of(k, "first")
        raw_first = self._call(self.store.compare_set, first_key, "", me.raw)
        first = me if raw_first == me.raw else Identity.decode(raw_first, first_key)
        if first.world_size != me.world_size:
            self._reject(
                "world_size_mismatch",
                _msg(
                    f"world size mismatch in {self._where}: this node, {me.describe()},",
                    f"expects {me.world_size} nodes but {first.describe()} joined first",
                    f"expecting {first.world_size}; give every node the same max_nodes",
                    "(--nnodes).",
                ),
            )
        claim_key = self.keys.claim(k, me.rank)
        raw_holder = self._call(self.store.compare_set, claim_key, "", me.raw)
        holder = me if raw_holder == me.raw else Identity.decode(raw_holder, claim_key)
        if holder != me:
            self._reject(
                "duplicate_rank",
                _msg(
                    f"duplicate rank {me.rank} in {self._where}: claimed by {holder.host}",
                    f"pid {holder.pid} and by {me.host} pid {me.pid}; give every node a",
                    f"distinct rank (--node-rank) in 0..{me.world_size - 1}.",
                ),
            )
        joined = self._call(self.store.add, self.keys.of(k, "count"), 1)
        self._event("joined", joined=joined, world_size=me.world_size)
        if joined == me.world_size:
            verdict = {"status": "complete", "by": asdict(me), "at": self.wall()}
            self._settle(verdict)
            return
        self._await_verdict()

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
        # The deadline passed: a short, fixed grace bounds naming the missing ranks and
        # publishing the verdict, so a busy store does not turn the report into a timeout.
        self.deadline = self.clock() + _DIAGNOSIS_GRACE
        claims = [self.keys.claim(self.round, rank) for rank in range(self.me.world_size)]
        missing = [
            rank for rank, key in enumerate(claims) if not self._call(self.store.check, [key])
        ]
        members = self.me.world_size - len(missing)
        waited = self.clock() - self.started
        message = _msg(
            f"rendezvous {self._where} timed out after {waited:.1f} s:",
            f"{members} of {self.me.world_size} nodes joined; missing ranks:",
            f"{format_ranks(missing)}. Start the missing nodes, check their logs, or raise",
            f"the join timeout ({self.cfg.join_timeout.total_seconds():g} s).",
        )
        self._settle(self._verdict("timeout", message))

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
        raw = self._call(self.store.compare_set, done, "", encoded)
        if decode_verdict(raw, done)["status"] == "complete":
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
            waited = self.clock() - self.started
            message = _msg(
                message,
                f"[reported by {by.describe()}; this node, {self.me.describe()},",
                f"waited {waited:.1f} s]",
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
            self._fail(
                RendezvousTimeoutError(
                    _msg(
                        f"{self._where} completed, but ranks {format_ranks(missing)} did not",
                        f"confirm reading the result within {timeout:g} s (read_timeout);",
                        "they probably died right after joining.",
                    )
                )
            )
        except StoreError as exc:
            self._raise_store(exc, "waiting for every node to read the result")

    def linger(self, timeout: float) -> None:
        """Exit barrier of a hosting node whose round failed: best effort, bounded.

        Waits up to ``timeout`` seconds until every member that claimed a rank has read the
        verdict, so the failure reaches them before this node (and its store) goes away.
        Store errors end the wait silently: the caller is already raising the round's error.
        """
        try:
            self.store.set_timeout(timeout)
            claims = [self.keys.claim(self.round, r) for r in range(self.me.world_size)]
            members = [r for r, key in enumerate(claims) if self.store.check([key])]
            acks = [self.keys.of(self.round, f"ack/{r}") for r in members]
            self.store.wait(acks, timeout)
        except StoreError as exc:
            self._event("linger_ended", error=f"{type(exc).__name__}: {exc}")

    # -- failures -------------------------------------------------------------------------

    def _raise_closed(self, raw: bytes) -> NoReturn:
        record = decode_verdict(raw, self.keys.closed)
        by = Identity(**record["by"])
        self._fail(
            RendezvousClosedError(
                _msg(
                    f"the rendezvous of run '{self.cfg.run_id}' at {self.cfg.endpoint} was",
                    f"closed by {by.describe()}; no further rounds run (this node:",
                    f"{self.me.describe()}, round {self.round}).",
                )
            )
        )

    def _raise_stale(self) -> NoReturn:
        self._fail(
            RendezvousStateError(
                _msg(
                    f"{self._where} already completed before this node,",
                    f"{self.me.describe()}, joined; a static rendezvous does not admit",
                    "late or restarted nodes into a finished round: restart every node,",
                    "or use a fresh run_id.",
                )
            )
        )

    def _raise_store(self, exc: StoreError, doing: str) -> NoReturn:
        waited = self.clock() - self.started
        error: RendezvousError
        if isinstance(exc, StoreTimeoutError):
            what = f"the rendezvous store at {self.cfg.endpoint} did not answer in time"
            error = RendezvousTimeoutError(
                _msg(f"{what} while {doing} in {self._where}, after {waited:.1f} s: {exc}")
            )
        else:
            if isinstance(exc, StoreProtocolError):
                what = f"the peer at {self.cfg.endpoint} is not a rendezvous store"
            else:
                what = f"lost the rendezvous store at {self.cfg.endpoint} (hosted by rank 0)"
            error = RendezvousConnectionError(
                _msg(f"{what} while {doing} in {self._where}, after {waited:.1f} s: {exc}")
            )
        error.__cause__ = exc
        self._fail(error)

    def _fail(self, error: RendezvousError) -> NoReturn:
        self._event("failed", error=type(error).__name__, message=str(error))
        raise error

    # -- helpers --------------------------------------------------------------------------

    def _call(self, op: Callable[..., Any], *args: Any) -> Any:
        """Run one store operation bounded by the deadline; translate store errors."""
        remaining = max(self.deadline - self.clock(), _MIN_OP_SECONDS)
        try:
            self.store.set_timeout(remaining)
            return op(*args)
        except StoreError as exc:
            self._raise_store(exc, f"calling {getattr(op, '__name__', 'a store operation')}")

    def _event(self, name: str, **fields: Any) -> None:
        if _log.isEnabledFor(logging.INFO):  # skip building the fields when nobody listens
            emit(_log, name, logging.INFO, **self._fields(), **fields)

    def _fields(self) -> dict[str, Any]:
        return {
            "run_id": self.cfg.run_id,
            "round": self.round,
            "rank": self.me.rank,
            "endpoint": self.cfg.endpoint,
            "elapsed": round(self.clock() - self.started, 6),
        }


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
