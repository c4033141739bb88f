"""One handler's node across rounds: its store connection, its member watch, its rounds.

The connection is dialled at the first round and kept: the store handed to users is that
connection, scoped to the run. A connection that broke mid-round is dropped and closed, so
the next round dials again (node 0 may be back). The hosting node also watches its members
(:mod:`rdzv.rendezvous._lost_member`) and how they leave (:mod:`rdzv.rendezvous._departures`)
for as long as it keeps the connection.

A round is the join (:mod:`rdzv.rendezvous._join`) followed, on the hosting node, by an exit
barrier (:mod:`rdzv.rendezvous._exit`): after a complete round, until every member read the
verdict; after a failed one, a bounded linger so the verdict reaches every member. Leaving
the run (``shutdown()``) is the last exit barrier; after a round that lost a member, it first
keeps the store up for nodes that arrive later, until that round's join deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from rdzv.errors import RendezvousConnectionError, RendezvousError, StoreError
from rdzv.events import INFO, emit, get_logger
from rdzv.rendezvous import _express
from rdzv.rendezvous._connection import close_store, dial, dial_member, reconnect
from rdzv.rendezvous._departures import Departures, watch_departures
from rdzv.rendezvous._exit import leave, linger
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._liveness import handler_ended, handler_started
from rdzv.rendezvous._lost_member import LostMemberWatch, watch_members
from rdzv.rendezvous._round_failures import connect_error
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Any, Final, TypeVar

    from rdzv.rendezvous._express import Then
    from rdzv.store.base import Store
    from rdzv.store.client import Ended, HeldGet

    _D = TypeVar("_D")
    Script = Generator[tuple[str, Any, float], Any, Then | None]

__all__ = ["Node"]

_log: Final = get_logger("rdzv.rendezvous")
_LINGER_SECONDS: Final = 10.0


class Node:
    """This node's side of a static rendezvous, round after round (see the module doc).

    Args:
        cfg: this node's validated settings.
        clock: the monotonic clock join deadlines are measured on.

    Attributes:
        me: this node's identity (the token tells two handlers in one process apart).
        keys: the store keys of the run.
        store: the connection, or None (before the first round, after it broke, after
            :meth:`leave`).
        next_round: the index the next :meth:`join_next` joins.
    """

    def __init__(self, cfg: StaticConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.clock = clock
        self.me = Identity.local(cfg.rank, cfg.world_size)
        self.me.encode()  # computed once, here: the claims compare it byte for byte
        handler_started(self.me.token, self)  # alive to this process's other handlers
        self.keys = RoundKeys(cfg.run_id)
        self.store: Store | None = None
        self.next_round = 0
        self._members: LostMemberWatch | None = None
        self._departures: Departures | None = None
        self._joined_last_round = False
        self._serve_until: tuple[int, float] | None = None  # a round that lost a member

    def join_next(self) -> Store:
        """Join the next round; return the (unscoped) store once every rank joined it.

        Raises:
            RendezvousError: the subclasses and cases that
                :meth:`rdzv.rendezvous.static.StaticTCPRendezvous.next_rendezvous` lists.
        """
        cfg = self.cfg
        started = self.clock()
        seconds = cfg.join_timeout.total_seconds()
        deadline = started + seconds
        round_index = self.next_round
        self.event(
            "join_start",
            round_index,
            0.0,
            world_size=cfg.world_size,
            join_timeout=seconds,
        )
        self.next_round += 1
        self._joined_last_round = False
        self._serve_until = None
        then: Then | None = None  # the rest of an express round, in the general join
        held: HeldGet | None = None
        if self.store is None and not cfg.start_daemon and _express.ON:  # a member's new one
            script = _express.member_script(
                self.me,
                self.keys,
                round_index,
                deadline,
                self.clock,
                self._events(round_index, started),
            )
            ended = self._connect_member(round_index, started, deadline, script)
            store: Store = ended.store
            if ended.ran and ended.value is None:  # the express joined a complete round
                self._joined_last_round = True  # (its store's timeout: cfg.read_timeout)
                return store
            then, held = ended.value, ended.held
        else:
            store = self._connect(round_index, started, deadline)
        self._watch_members(store)
        if self._departures is not None:
            self._departures.forget_before(round_index)
        protocol = self._protocol(round_index, started, deadline, store)
        try:
            try:
                protocol.join(None if then is None else partial(then, protocol, held))
            except RendezvousError:
                if cfg.start_daemon and not protocol.connection_lost:
                    # let the verdict reach every member before leaving
                    protocol.linger(min(cfg.read_timeout.total_seconds(), _LINGER_SECONDS))
                    if protocol.reason == "member_lost":  # late arrivals: see leave()
                        self._serve_until = (round_index, deadline)
                raise
            if cfg.start_daemon:
                store.set_timeout(cfg.read_timeout)
                timeout = cfg.read_timeout.total_seconds()
                protocol.wait_for_readers(timeout, self._watch_departures(store))
        except RendezvousError:
            if protocol.connection_lost:
                self._drop(store)
            raise
        finally:
            if held is not None:
                held.release()  # a wait nothing ended is cancelled
            store.set_timeout(cfg.read_timeout)
            if self._members is not None:
                self._members.settled(round_index)
        self._joined_last_round = True
        return store

    def _protocol(
        self, round_index: int, started: float, deadline: float, store: Store
    ) -> RoundProtocol:
        """The general join of round ``round_index`` over ``store``."""
        return RoundProtocol(
            store,
            self.cfg,
            self.me,
            round_index,
            deadline,
            self.clock,
            time.time,
            reconnect=partial(reconnect, store),
            started=started,
            arbiter=self._members,
        )

    def _drop(self, store: Store) -> None:
        """Forget ``store``, whose connection broke: the next round dials again (node 0
        may be back)."""
        self.store = None
        self._unwatch_members()
        close_store(store)

    def leave(self) -> tuple[int | None, str | None]:
        """Leave the run: the ``shutdown()`` exit barrier of the last round this node joined
        (:func:`rdzv.rendezvous._exit.leave`), then close the connection (and the server, if
        hosted) and the member watch.

        Returns:
            How many other nodes left (hosting node; None on the others, or when there was
            no connection or no joined round), and why leaving failed, if it did (store
            failures are reported this way, never raised).
        """
        store, self.store = self.store, None
        handler_ended(self.me.token)  # its claims may be taken over from now on
        left: int | None = None
        error: str | None = None
        if store is not None:
            last = self.next_round - 1
            try:
                if self._joined_last_round:
                    report = partial(self._report, last)
                    departures = self._departures
                    left = leave(store, self.cfg, self.keys, last, report, departures)
                elif self._serve_until is not None:
                    self._serve_late_arrivals(store, *self._serve_until)
            except RendezvousConnectionError as exc:
                error = str(exc)
            finally:
                self._unwatch_members()
                close_store(store)
        return left, error

    def _serve_late_arrivals(self, store: Store, round_index: int, deadline: float) -> None:
        """The round lost a member (invariant 8 of :mod:`rdzv.rendezvous._join`): keep the
        store up until every rank read its verdict, or until its join deadline, so a node
        that arrives later fails at once naming the lost rank instead of finding no store."""
        remaining = deadline - self.clock()
        if remaining <= 0:
            return
        world_size, keys = self.cfg.world_size, self.keys
        error = linger(store, keys, round_index, world_size, remaining, self.clock, deadline)
        if error is not None:
            self.event("linger_ended", round_index, 0.0, error=error)

    def declare_dead(self) -> None:
        """This node's process counts as dead from now on, to this process's other handlers
        (they may take over its claims); no I/O, nothing stopped."""
        handler_ended(self.me.token)

    def event(
        self,
        name: str,
        round_index: int,
        elapsed: float,
        level: int = INFO,
        **fields: Any,
    ) -> None:
        """Emit event ``name`` of round ``round_index`` (see :mod:`rdzv.events`)."""
        if not _log.isEnabledFor(level):  # skip building the fields when nobody listens
            return
        cfg = self.cfg
        emit(
            _log,
            name,
            level,
            run_id=cfg.run_id,
            round=round_index,
            rank=cfg.rank,
            endpoint=cfg.endpoint,
            elapsed=elapsed,
            **fields,
        )

    def _report(self, round_index: int, name: str, level: int, **fields: Any) -> None:
        self.event(name, round_index, 0.0, level, **fields)

    def _round_event(self, round_index: int, started: float, name: str, **fields: Any) -> None:
        """An event of the round as its join emits it (elapsed since ``started``)."""
        self.event(name, round_index, round(self.clock() - started, 6), INFO, **fields)

    def _connect(self, round_index: int, started: float, deadline: float) -> Store:
        """This node's connection: the one it keeps, else a new one."""
        if self.store is None:
            self.store = self._dial(round_index, started, deadline, partial(dial, self.cfg))
        return self.store

    def _connect_member(
        self, round_index: int, started: float, deadline: float, script: Script
    ) -> Ended:
        """A member's new connection, ``script`` (the express) run on it."""
        ended = self._dial(round_index, started, deadline, partial(dial_member, self.cfg, script))
        self.store = ended.store
        return ended

    def _dial(
        self, round_index: int, started: float, deadline: float, how: Callable[[float], _D]
    ) -> _D:
        """Connect ``how`` (given the seconds left); a connection that fails is a failed
        round (its event, and the rendezvous error it stands for, raised)."""
        try:
            return how(max(round(deadline - self.clock(), 3), 0.0))
        except StoreError as exc:
            error = connect_error(self.cfg, exc, self.clock() - started)
            elapsed = round(self.clock() - started, 6)
            kind = type(error).__name__
            self.event("failed", round_index, elapsed, error=kind, message=str(error))
            raise error from exc

    def _events(self, round_index: int, started: float) -> Callable[..., None] | None:
        """How the express emits its round's events (None: nobody listens)."""
        if not _log.isEnabledFor(INFO):
            return None
        return partial(self._round_event, round_index, started)

    def _watch_members(self, store: Store) -> None:
        if self._members is None and self.cfg.start_daemon:
            self._members = watch_members(store, self.cfg, self.me, time.time)

    def _watch_departures(self, store: Store) -> Departures | None:
        """The hosting node's departures watch, started at its first exit barrier (it replays
        what the server recorded: the join path pays nothing for it)."""
        if self._departures is None and self._members is not None:
            self._departures = watch_departures(store, self.cfg.run_id, self.me)
        return self._departures

    def _unwatch_members(self) -> None:
        members, self._members = self._members, None
        departures, self._departures = self._departures, None
        if members is not None:
            members.close()
        if departures is not None:
            departures.close()
