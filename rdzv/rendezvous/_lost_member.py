"""The hosting node's watch of its members: lost ones, and when a round may complete.

Invariants 8 and 10 of :mod:`rdzv.rendezvous._join`. The hosting node runs the store server
in-process, so it sees a member's store connection close (a SIGKILL, a crash, a network
failure the kernel reports). Through the server's generic writer watch
(:meth:`rdzv.store.server.StoreServer.watch_writers`, which follows every key's writer from
the server's first request, so a claim written before this watch existed is followed too) it
learns when the connection that wrote a rank's claim closes, and of every change of the
round's claims, confirmations and verdict.

A claim whose connection closed is *pending*: the round cannot complete (:meth:`decide`)
until a restarted process of that node takes the claim over (invariant 6; the claim changes)
or the round gets a verdict. The watch waits :data:`MEMBER_GRACE` seconds for the takeover,
then checks over a connection of its own: if the round still has no verdict and the claim
still holds the vanished identity, it writes the round's verdict, ``aborted`` with reason
``member_lost`` and ``lost`` (the identity), with ``compare_set("", ...)`` on ``done`` (one
verdict per round, invariant 1). Every node waiting in that round then fails at once with
``RendezvousConnectionError`` naming the rank; a node that arrives later reads the same
verdict.

:meth:`decide` is the hosting node's completion decision (invariant 10): it returns
``"complete"`` only once every rank confirmed and no claim is pending, and it takes that
decision under the same lock that records a closed connection, so each close the server
reported is either before the decision (the round waits) or after it (the round completed
first: a member lost after that is the exit barrier's business). Each member writes, at
the head of its confirmation, how long it has until its own join deadline; the watch turns
that into the first member deadline of the round on this node's clock, and :meth:`decide`
returns ``"member_deadline"`` when it passes with a rank missing, so the hosting node names
the missing ranks at once from what it saw (:meth:`members`), with no request to ask
(invariant 11). Rounds with a verdict, or that the hosting node settled (it read their
verdict), are not checked. Events on ``rdzv.rendezvous``: ``member_vanished`` (WARNING;
``lost_rank``, ``grace``: a claim's connection closed, the round waits), ``member_lost``
(WARNING; ``lost_rank``, ``lost``, ``grace``, ``first``: whether this verdict won) and
``member_loss_not_reported`` (WARNING; ``lost_rank``, ``error``, ``attempt``, ``retry_in``:
the seconds until the next check of that claim, None after the last of
:data:`_CHECK_ATTEMPTS` or once the round is decided).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial

from rdzv.errors import RendezvousStateError, StoreError
from rdzv.events import WARNING, emit, get_logger
from rdzv.rendezvous._connection import close_store, fresh_connection, hosted_server
from rdzv.rendezvous._departures import ServerKeys
from rdzv.rendezvous._round_failures import member_lost_message
from rdzv.rendezvous._round_rules import host_decision, loss_watched, member_lost
from rdzv.rendezvous._round_state import (
    Identity,
    RoundKeys,
    confirmation_due,
    encode_verdict,
)
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.base import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    from rdzv.store.server import StoreServer

__all__ = ["MEMBER_GRACE", "LostMemberWatch", "watch_members"]

_log: Final = get_logger("rdzv.rendezvous")

#: Seconds a restarted process has to take over the claim of its vanished predecessor
#: before the hosting node fails the round. A supervisor that restarts at once through a warm
#: launcher takes about 0.1-0.3 s from the kill to the takeover, on a loaded machine up to
#: 0.75 s was measured (scenarios/restart-after-join.toml); 2 s keeps a margin.
MEMBER_GRACE: Final = 2.0
_CHECK_SECONDS: Final = 1.0  # bound of each store operation of one check
#: Checks of one vanished claim (a check that failed is tried again, ``_RETRY_SECONDS``
#: later): one that timed out on a loaded machine would otherwise leave the round without
#: its verdict until a deadline, and then it names no missing rank.
_CHECK_ATTEMPTS: Final = 5
_RETRY_SECONDS: Final = 0.5
_CONNECT_SECONDS: Final = 5.0  # the watch dials the server of its own process (when needed)


def watch_members(
    store: Store, cfg: StaticConfig, me: Identity, wall: Callable[[], float]
) -> LostMemberWatch | None:
    """Start watching the members of the server ``store`` hosts; None when ``store`` hosts
    no server. The watch dials a connection of its own to that server only when a member
    vanished (it is not needed before, and dialling it at the start of the first round put
    one more connect and handshake, queued behind every other node's, before this node's
    join)."""
    server = hosted_server(store)
    if server is None:
        return None
    return LostMemberWatch(
        server, partial(fresh_connection, store, _CONNECT_SECONDS), cfg, me, wall
    )


class LostMemberWatch:
    """Fails a round whose member's store connection closed (see the module doc).

    Args:
        server: the store server this node hosts.
        store: a connection of the watch's own to ``server``, or how to open one (called
            when a check first needs it); closed by :meth:`close`.
        cfg: this node's settings.
        me: this node's identity (the verdict's author; its own claim is not watched).
        wall: a wall clock (seconds since the epoch) for the verdict's timestamp.
        grace: seconds a restarted process has to take a claim over; default
            :data:`MEMBER_GRACE`.
    """

    def __init__(
        self,
        server: StoreServer,
        store: Store | Callable[[], Store],
        cfg: StaticConfig,
        me: Identity,
        wall: Callable[[], float],
        grace: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store: Store | None = store if isinstance(store, Store) else None
        self._open: Callable[[], Store] | None = None if isinstance(store, Store) else store
        self._cfg = cfg
        self._me = me
        self._wall = wall
        self._grace = MEMBER_GRACE if grace is None else grace
        self._clock = clock
        self._keys = RoundKeys(cfg.run_id)
        self._machine_head = me.raw[: me.raw.index(b'"pid":')]  # {"host":..,"machine":..,
        self._watched = ServerKeys(cfg.run_id, rb"(?:(claim|confirmed)/(\d+)|done)")
        self._settled = -1
        self._closed = False
        self._timers: set[threading.Thread] = set()
        self._lock = threading.Lock()  # all of the round state below, _closed, _timers
        self._changed = threading.Condition(self._lock)
        self._confirmed: dict[int, set[int]] = {}  # round -> ranks with a confirmation
        self._claimed: dict[int, set[int]] = {}  # round -> ranks with a claim
        self._due: dict[int, tuple[float, int]] = {}  # round -> first member deadline, rank
        self._dues: dict[int, dict[int, float]] = {}  # round -> rank -> its deadline
        self._pending: dict[int, dict[int, bytes]] = {}  # round -> rank -> vanished claim
        self._ended: set[int] = set()  # rounds with a verdict, or decided complete
        self._io = threading.Lock()  # the watch's own connection
        self._cancel = server.watch_writers(self._watched.selects, self._on_close, self._on_write)

    def settled(self, round_index: int) -> None:
        """This node read the verdict of rounds up to ``round_index``: stop checking them."""
        with self._lock:
            self._settled = max(self._settled, round_index)
            states = (self._confirmed, self._claimed, self._due, self._dues, self._pending)
            for state in states:
                for k in [k for k in state if k <= self._settled]:
                    del state[k]
            self._ended = {k for k in self._ended if k > self._settled}

    def decide(
        self, round_index: int, world_size: int, deadline: float, clock: Callable[[], float]
    ) -> str:
        """Wait (until the monotonic ``deadline``) for round ``round_index`` to be decided.

        Returns:
            ``"complete"``: every rank confirmed and no claim is pending; from now on a
            member whose connection closes is not reported (the round completed). The
            caller writes the ``complete`` verdict. ``"verdict"``: the round has one; the
            caller reads it. ``"deadline"``: the deadline passed first. ``"member_deadline"``:
            the join deadline a member reported with its confirmation passed first, some
            rank has not confirmed (the caller names the missing ranks, :meth:`members`).
            ``"closed"``: the watch was closed (the node is leaving); the caller waits for
            the verdict in the store.
        """
        with self._changed:
            while True:
                confirmed = self._confirmed.get(round_index, set())
                remaining = deadline - clock()
                due = self._due.get(round_index)
                first = None if due is None else due[0] - self._clock()
                outcome = host_decision(
                    round_index in self._ended,
                    self._closed,
                    confirmed,
                    world_size,
                    self._pending.get(round_index, {}),
                    remaining,
                    first,
                )
                if outcome == "complete":
                    self._ended.add(round_index)
                if outcome is not None:
                    return outcome
                if first is not None and len(confirmed) < world_size:
                    remaining = min(remaining, first)
                self._changed.wait(remaining)

    def members(self, round_index: int) -> tuple[list[int], list[int], int | None]:
        """The ranks of round ``round_index`` that confirmed, those that only claimed, and
        the rank whose join deadline passes first (None: no member said)."""
        with self._lock:
            confirmed = self._confirmed.get(round_index, set())
            claimed = self._claimed.get(round_index, set()) - confirmed
            due = self._due.get(round_index)
            return sorted(confirmed), sorted(claimed), None if due is None else due[1]

    def close(self) -> None:
        """Stop watching, cancel pending checks, close the watch's connection (idempotent;
        a check in progress ends first, within a few seconds at most)."""
        self._cancel()
        with self._lock:
            self._closed = True
            timers, self._timers = self._timers, set()
            self._changed.notify_all()
        for timer in timers:
            if isinstance(timer, threading.Timer):
                timer.cancel()
        with self._io:
            if self._store is not None:
                close_store(self._store)

    # -- on the server's loop thread --------------------------------------------------------

    def _on_write(self, key: bytes, value: bytes | None) -> None:
        match = self._watched.match(key)
        if match is None:
            return
        round_index, kind = int(match[1]), match[2]
        with self._lock:
            if round_index <= self._settled:
                return
            # Wake decide() only when its outcome or its wait can change: a member write
            # that changes neither costs the hosting node's joining thread nothing.
            changed = True
            if kind is None:  # done: the round has its verdict
                self._ended.add(round_index)
            elif kind == b"confirmed":
                confirmed = self._confirmed.setdefault(round_index, set())
                confirmed.add(int(match[3]))
                changed = len(confirmed) >= self._cfg.world_size  # every rank is in
                if (due := self._due_in(value)) is not None:  # invariant 11 of _join
                    changed |= self._member_due(round_index, int(match[3]), due)
            else:  # a claim changed: a takeover ends its predecessor's pending loss
                if value is not None:
                    self._claimed.setdefault(round_index, set()).add(int(match[3]))
                pending = self._pending.get(round_index, {})
                changed = pending.get(int(match[3]), value) != value
                if changed:
                    del pending[int(match[3])]
            if changed:
                self._changed.notify_all()

    def _due_in(self, value: bytes | None) -> float | None:
        """The join deadline, on ``clock``, of the member whose confirmation is ``value``
        (:func:`~rdzv.rendezvous._round_state.confirmation_due`)."""
        same_clock = self._clock is time.monotonic
        return confirmation_due(value, self._clock(), self._me, self._machine_head, same_clock)

    def _member_due(self, round_index: int, rank: int, due: float) -> bool:
        """Rank ``rank``'s deadline is ``due``: a restarted rank replaces its predecessor's
        (with ``_lock`` held). Returns whether the round's first member deadline moved."""
        dues = self._dues.setdefault(round_index, {})
        dues[rank] = due
        was = first = self._due.get(round_index)
        if first is not None and first[1] == rank:  # the first one moved: look again
            first = min((at, r) for r, at in dues.items())
        self._due[round_index] = now = min(first or (due, rank), (due, rank))
        return now != was

    def _on_close(self, key: bytes, value: bytes | None) -> None:
        match = self._watched.match(key)
        if match is None or match[2] != b"claim" or value is None:
            return
        round_index, rank = int(match[1]), int(match[3])
        with self._lock:
            settled = round_index <= self._settled
            if self._closed or not loss_watched(
                rank == self._me.rank, settled, round_index in self._ended
            ):
                return
            self._pending.setdefault(round_index, {})[rank] = value
            timer = self._later(self._grace, (round_index, rank, value, 1))
        timer.start()
        self._event("member_vanished", round_index, lost_rank=rank, grace=self._grace)

    def _later(self, seconds: float, args: tuple[int, int, bytes, int]) -> threading.Timer:
        """A timer that runs :meth:`_check` with ``args`` (with ``_lock`` held; unstarted)."""
        timer = threading.Timer(seconds, self._check, args)
        timer.daemon = True
        self._timers.add(timer)
        return timer

    # -- on a timer thread ---------------------------------------------------------------

    def _check(self, round_index: int, rank: int, value: bytes, attempt: int = 1) -> None:
        try:
            with self._io:
                if self._closed:
                    return
                outcome = self._abort_if_gone(round_index, rank, value)
        except (StoreError, RendezvousStateError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            self._drop_connection()  # the next attempt dials afresh
            retry = self._retry(round_index, rank, value, attempt)
            self._event(
                "member_loss_not_reported",
                round_index,
                lost_rank=rank,
                error=error,
                attempt=attempt,
                retry_in=_RETRY_SECONDS if retry else None,
            )
        else:
            if outcome is not None:
                lost, first = outcome
                self._event(
                    "member_lost",
                    round_index,
                    lost_rank=rank,
                    lost=lost.describe(),
                    grace=self._grace,
                    first=first,
                )
        finally:
            with self._lock:
                self._timers.discard(threading.current_thread())

    def _drop_connection(self) -> None:
        """Close the connection the watch dialled itself (one it was given is kept)."""
        with self._io:
            store, opened = self._store, self._open is not None
            if opened and store is not None:
                self._store = None
                close_store(store)

    def _retry(self, round_index: int, rank: int, value: bytes, attempt: int) -> bool:
        """Check again later, unless this was the last attempt or the round is decided
        (or settled, or the watch closed); returns whether it will."""
        if attempt >= _CHECK_ATTEMPTS:
            return False
        with self._lock:
            if self._closed or round_index <= self._settled or round_index in self._ended:
                return False
            timer = self._later(_RETRY_SECONDS, (round_index, rank, value, attempt + 1))
        timer.start()
        return True

    def _abort_if_gone(
        self, round_index: int, rank: int, value: bytes
    ) -> tuple[Identity, bool] | None:
        """Write the ``member_lost`` verdict unless the round has one or the claim moved on;
        return the vanished identity and whether this verdict won, or None."""
        done = self._keys.of(round_index, "done")
        claim = self._keys.claim(round_index, rank)
        store = self._store
        if store is None:
            assert self._open is not None
            store = self._store = self._open()
        store.set_timeout(_CHECK_SECONDS)
        has_verdict = bool(store.check([done]))
        if not member_lost(has_verdict, None if has_verdict else store.get(claim), value):
            return None  # the round ended, or a restarted process took the claim over
        lost = Identity.decode(value, claim)
        where = f"round {round_index} of run '{self._cfg.run_id}' at {self._cfg.endpoint}"
        verdict = {
            "status": "aborted",
            "reason": "member_lost",
            "message": member_lost_message(where, lost, self._grace),
            "by": self._me.as_dict(),
            "at": self._wall(),
            "lost": lost.as_dict(),
        }
        encoded = encode_verdict(verdict)
        return lost, store.compare_set(done, "", encoded) == encoded

    def _event(self, name: str, round_index: int, **fields: Any) -> None:
        cfg = self._cfg
        emit(
            _log,
            name,
            WARNING,
            run_id=cfg.run_id,
            round=round_index,
            rank=cfg.rank,
            endpoint=cfg.endpoint,
            **fields,
        )
