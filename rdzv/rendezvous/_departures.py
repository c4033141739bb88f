"""The hosting node's watch of members leaving a round: who read the result, who called
``shutdown()``, and who is gone without doing either.

The exit barriers (:mod:`rdzv.rendezvous._exit`) wait for each member's ``ack/<rank>`` (it
read the verdict) and ``exit/<rank>`` (it called ``shutdown()``). A member that died, or
whose store connection closed (a SIGKILL, a crash, a reset), will never write them: waiting
``read_timeout`` for it (900 s under torchrun) held node 0 -- and, once node 0 gave up and
stopped the store, every other node -- for nothing. The hosting node runs the store server
in-process, so it sees the connection that wrote a rank's claim close, through the server's
generic writer watch (:meth:`rdzv.store.server.StoreServer.watch_writers`); that is the
connection the member keeps and hands to its user. A member of this machine in another
process is also probed by pid (:func:`rdzv.rendezvous._liveness.process_alive`): a process
that died while a child it forked still holds its socket leaves the connection open.

Invariants:

1. A rank is *gone* from round k once the connection that wrote its round-k claim closed
   (and no other connection wrote the claim since: a restarted process that takes it over is
   there) or once the process of that claim, on this machine and not this process, is dead
   (invariant 1 of :mod:`rdzv.rendezvous._liveness`: only a certain "dead").
2. :meth:`Departures.wait` returns once every rank it waits for wrote its key or is gone;
   else once none of them did either for ``quiet`` seconds (a member that is alive but
   silent: the others are not held by it for long), and at the latest after ``limit``
   seconds. It never touches the store: the server's loop thread tells it what changed.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from rdzv.errors import RendezvousStateError
from rdzv.rendezvous._connection import hosted_server
from rdzv.rendezvous._liveness import process_alive
from rdzv.rendezvous._round_state import Identity, RoundKeys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.store.base import Store
    from rdzv.store.server import StoreServer

__all__ = [
    "PROBE_SECONDS",
    "QUIET_SECONDS",
    "Departures",
    "ServerKeys",
    "Waited",
    "watch_departures",
]

#: How long an exit barrier waits while no member it waits for says anything (it read the
#: result, called ``shutdown()``, or its connection closed): a member that is alive but
#: silent holds the hosting node this long past the last one that did, not ``read_timeout``.
QUIET_SECONDS: Final = 10.0
#: How often the liveness of the silent members of this machine is probed, while nothing is
#: heard of any member.
PROBE_SECONDS: Final = 0.5


class ServerKeys:
    """Which keys of a run's rounds a writer watch follows, as the server sees them (with the
    TCPStore client's leading "/", torch's too): ``round/<k>/`` then ``tail`` (a regex).

    :meth:`selects` is the watch's predicate (called on every write: a prefix test first);
    :meth:`match` parses a selected key (group 1: the round). Both run on the server's loop
    thread, the watch's callback right after its predicate: the match of the key
    :meth:`selects` saw last is kept for it.
    """

    __slots__ = ("_head", "_last", "_regex")

    def __init__(self, run_id: str, tail: bytes) -> None:
        self._head = f"/{RoundKeys(run_id).prefix}/round/".encode()
        self._regex = re.compile(re.escape(self._head) + rb"(\d+)/" + tail)
        self._last: tuple[bytes, re.Match[bytes]] | None = None

    def selects(self, key: bytes) -> bool:
        if not key.startswith(self._head):
            return False
        match = self._regex.fullmatch(key)
        if match is None:
            return False
        self._last = (key, match)
        return True

    def match(self, key: bytes) -> re.Match[bytes] | None:
        last = self._last  # one read: another thread may replace it (never change it)
        if last is not None and last[0] is key:
            return last[1]
        return self._regex.fullmatch(key)


class Waited:
    """How an exit barrier ended.

    Attributes:
        done: the ranks that wrote the key waited for.
        gone: the ranks that did not and are gone (connection closed, or process dead).
        missing: the ranks that did not and are not known to be gone.
        ended_by: ``None`` (every rank wrote its key or is gone), ``"quiet"`` (none did for
            the quiet window) or ``"limit"``.
        waited: seconds the barrier waited.
    """

    __slots__ = ("done", "ended_by", "gone", "missing", "waited")

    def __init__(
        self,
        done: list[int],
        gone: list[int],
        missing: list[int],
        ended_by: str | None,
        waited: float,
    ) -> None:
        self.done = done
        self.gone = gone
        self.missing = missing
        self.ended_by = ended_by
        self.waited = waited


def watch_departures(store: Store, run_id: str, me: Identity) -> Departures | None:
    """Start watching how the members of the server ``store`` hosts leave; None when
    ``store`` hosts no server (nobody sees its members' connections close)."""
    server = hosted_server(store)
    if server is None:
        return None
    return Departures(server, run_id, me)


class Departures:
    """See the module doc.

    Args:
        server: the store server this node hosts.
        run_id: the run whose rounds are watched.
        me: this node's identity (its own rank is never waited for).
        clock: the monotonic clock of the waits.
        alive: whether a process of this machine still runs (by pid).
    """

    def __init__(
        self,
        server: StoreServer,
        run_id: str,
        me: Identity,
        clock: Callable[[], float] = time.monotonic,
        alive: Callable[[int], bool] = process_alive,
    ) -> None:
        self._me = me
        self._clock = clock
        self._alive = alive
        self._keys = ServerKeys(run_id, rb"(claim|ack|exit)/(\d+)")
        self._floor = 0  # rounds below are forgotten
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        # round -> kind ("ack", "exit") -> ranks that wrote it
        self._written: dict[int, dict[str, set[int]]] = {}
        self._claims: dict[int, dict[int, bytes]] = {}  # round -> rank -> its claim
        self._gone: dict[int, set[int]] = {}  # round -> ranks gone (invariant 1)
        self._waits: list[_Wait] = []  # the waits in progress
        self._pids: dict[bytes, int] = {}  # claim -> pid to probe (0: none); waits' thread
        self._cancel = server.watch_writers(self._keys.selects, self._on_close, self._on_write)

    def forget_before(self, round_index: int) -> None:
        """Stop keeping what happened in rounds before ``round_index``."""
        with self._lock:
            self._floor = max(self._floor, round_index)
            for state in (self._written, self._claims, self._gone):
                for k in [k for k in state if k < self._floor]:
                    del state[k]
        self._pids.clear()

    def wait(
        self, round_index: int, kind: str, ranks: list[int], limit: float, quiet: float
    ) -> Waited:
        """Wait until every rank of ``ranks`` wrote ``round/<round_index>/<kind>/<rank>``
        or is gone; or until none did for ``quiet`` seconds; or ``limit`` seconds
        (invariant 2). Costs O(len(ranks)) in all, whatever the order of events, plus the
        probes of the pending members of this machine, each :data:`PROBE_SECONDS` that
        nothing was heard of (while members answer, none is probed)."""
        start = self._clock()
        end = start + limit
        next_probe = start
        with self._lock:
            written = self._written.get(round_index, {}).get(kind, set())
            gone = self._gone.get(round_index, set())
            waiting = _Wait(round_index, kind, ranks, written | gone, start)
            self._waits.append(waiting)
        try:
            while True:
                with self._changed:
                    now = self._clock()
                    ended_by = waiting.ended_by(now, end, quiet)
                    if ended_by != "waiting":
                        written = set(self._written.get(round_index, {}).get(kind, ()))
                        gone = set(self._gone.get(round_index, ()))
                        break
                    probe_at = max(next_probe, waiting.heard + PROBE_SECONDS)
                    if now < probe_at:
                        self._changed.wait(min(end, waiting.heard + quiet, probe_at) - now)
                        continue
                    claims = self._claims.get(round_index, {})
                    probed = {r: claims[r] for r in waiting.pending if r in claims}
                next_probe = now + PROBE_SECONDS
                dead = self._dead(probed)  # system calls: outside the lock
                if dead:
                    with self._lock:
                        for rank in dead:
                            self._mark_gone(round_index, rank)
        finally:
            with self._lock:
                self._waits.remove(waiting)
        return Waited(
            [r for r in ranks if r in written],
            [r for r in ranks if r not in written and r in gone],
            [r for r in ranks if r not in written and r not in gone],
            ended_by,
            self._clock() - start,
        )

    def close(self) -> None:
        """Stop watching (idempotent)."""
        self._cancel()
        with self._lock:
            self._changed.notify_all()

    def _mark_gone(self, round_index: int, rank: int) -> None:
        """Rank ``rank`` is gone from round ``round_index`` (with ``_lock`` held)."""
        self._gone.setdefault(round_index, set()).add(rank)
        self._release(round_index, None, rank)

    def _release(self, round_index: int, kind: str | None, rank: int) -> None:
        """Tell the waits of round ``round_index`` (and of ``kind``; None: of any kind) that
        ``rank`` is released (with ``_lock`` held)."""
        for waiting in self._waits:
            mine = waiting.round == round_index and kind in (None, waiting.kind)
            # Only the last rank ends the wait: any other moves its timers later, which it
            # finds when they come (at 256 members, 255 wake-ups of the hosting node fewer).
            if mine and waiting.release(rank, self._clock()) and not waiting.pending:
                self._changed.notify_all()

    def _dead(self, claims: dict[int, bytes]) -> list[int]:
        """The ranks of ``claims`` whose claimant is a dead process of this machine, not
        this process (invariant 1)."""
        dead = []
        for rank, raw in claims.items():
            pid = self._pids.get(raw)
            if pid is None:
                pid = self._pids[raw] = self._pid_to_probe(raw)
            if pid and not self._alive(pid):
                dead.append(rank)
        return dead

    def _pid_to_probe(self, raw: bytes) -> int:
        """The pid of the claimant ``raw`` if it is another process of this machine, else 0
        (this process's handlers, other machines and foreign data are not probed)."""
        try:
            holder = Identity.decode(raw, "claim")
        except RendezvousStateError:
            return 0
        same = holder.pid != self._me.pid and holder.same_machine(self._me)
        return holder.pid if same else 0

    # -- on the server's loop thread --------------------------------------------------------

    def _on_write(self, key: bytes, value: bytes | None) -> None:
        match = self._keys.match(key)
        if match is None:
            return
        round_index, kind, rank = int(match[1]), match[2].decode(), int(match[3])
        with self._lock:
            if round_index < self._floor or rank == self._me.rank:
                return
            if kind == "claim":  # a new writer: a restarted process took the claim over
                self._gone.get(round_index, set()).discard(rank)
                if value is not None:
                    self._claims.setdefault(round_index, {})[rank] = value
            else:
                self._written.setdefault(round_index, {}).setdefault(kind, set()).add(rank)
                self._release(round_index, kind, rank)

    def _on_close(self, key: bytes, value: bytes | None) -> None:
        match = self._keys.match(key)
        if match is None or match[2] != b"claim":
            return
        round_index, rank = int(match[1]), int(match[3])
        with self._lock:
            if round_index < self._floor or rank == self._me.rank:
                return
            self._mark_gone(round_index, rank)


class _Wait:
    """One :meth:`Departures.wait` in progress: the ranks it still waits for, and when it
    last heard of one (guarded by the watch's lock)."""

    __slots__ = ("heard", "kind", "pending", "round")

    def __init__(
        self, round_index: int, kind: str, ranks: list[int], released: set[int], now: float
    ) -> None:
        self.round = round_index
        self.kind = kind
        self.pending = set(ranks) - released
        self.heard = now

    def release(self, rank: int, now: float) -> bool:
        """``rank`` is released; return whether this wait was waiting for it."""
        if rank not in self.pending:
            return False
        self.pending.discard(rank)
        self.heard = now
        return True

    def ended_by(self, now: float, end: float, quiet: float) -> str | None:
        """Why this wait ends at ``now``: None (nobody is pending), ``"limit"`` (``end``
        passed), ``"quiet"`` (nothing heard for ``quiet`` seconds), or ``"waiting"``."""
        if not self.pending:
            return None
        if now >= end:
            return "limit"
        return "quiet" if now >= self.heard + quiet else "waiting"
