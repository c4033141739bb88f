"""The store server's bounds on what connections hold: the handshake deadline and the buffer budget.

Two bounds protect the server from peers that hold resources without finishing anything,
and neither may cut a client that speaks the protocol merely because it (or the machine) is
slow:

* **The handshake deadline.** A connection must complete its first request (``VALIDATE``,
  5 bytes) within ``handshake_timeout`` seconds of being accepted, else it is dropped. This
  is the only bound measured in time alone, and it applies only to connections that never
  completed a request: a legitimate client sends ``VALIDATE`` the moment it connects, and
  one that was cut before doing so (its process stopped between ``connect`` and ``send``)
  fails its handshake, which rdzv's client retries. One timer serves all such connections
  (:attr:`Bounds.unvalidated` is in order of acceptance), so a closed connection is freed at
  once, not when a timer of its own would have been due.
* **The buffer budget.** The bytes of incomplete requests held by all connections together
  (:attr:`Bounds.held`) should not exceed ``budget``. A connection whose read takes the total
  over it is first relieved by cutting the connections whose request has been incomplete
  for ``stall_timeout`` seconds or longer, oldest first; if that does not suffice, the
  connection stops being read (the kernel's socket buffers and the peer's ``send`` wait)
  until the total falls, unless its request is the oldest one still read: that one goes on,
  so some request always completes (a timer looks again when the oldest would count as
  stalled). While the budget is spent every read takes at most :data:`SPENT_READ_SIZE`
  bytes, so a connection that begins a request then adds at most that before it stops
  being read. The total is therefore at most ``budget``, one frame, and
  :data:`SPENT_READ_SIZE` per connection. So a slow client is cut only while the server is
  short of buffer memory, only when its request has been stalled that long, and is logged
  with the bound named; one that merely stalls, with memory to spare, is kept however long
  it stalls. ``budget`` is at least one frame (``Limits.max_frame``), so any single request
  within the limits can complete.

Each connection holds at most ``Limits.max_frame`` bytes of an incomplete request (the
decoder's bound, plus one read) and, before its first request completed, fewer than 5 (a
longer first request is not ``VALIDATE``, and the connection is dropped at once).

Memory returns after an attack: the process's allocator keeps what the connections freed
(glibc's returns little of it by itself: 37 MiB stayed resident after 10,000 hostile
connections, of which Python still used under 1 MiB), so once ``held`` has been above
:data:`TRIM_MARK` and falls to a sixteenth of it, :func:`release_memory` hands the free
pages back to the system, a second later.

Runs on the server's loop thread. The connections are
:class:`rdzv.store.server._conn.Connection` objects; this module reads their ``partial`` and
``reading_paused`` and calls their :meth:`~rdzv.store.server._conn.Connection.cut` and
:meth:`~rdzv.store.server._conn.Connection.starve`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.store.server._conn import Connection
    from rdzv.store.server._loop import EventLoop, Timer

__all__ = [
    "BUDGET_BOUND",
    "BUFFER_BUDGET",
    "HELD_BOUND",
    "MAX_HELD_BYTES",
    "OVERSENT_BOUND",
    "READ_SIZE",
    "SPENT_READ_SIZE",
    "TRIM_MARK",
    "Bounds",
    "may_hold",
    "release_memory",
]

#: Bytes of incomplete requests all connections may hold together (default).
BUFFER_BUDGET: Final = 64 * 1024 * 1024
#: Bytes one read takes from a connection, and while the budget is spent: so a connection
#: that begins a request then adds at most that much before it stops being read.
READ_SIZE: Final = 65536
SPENT_READ_SIZE: Final = 4096
#: ``held`` above which memory is handed back once it falls again (module doc).
TRIM_MARK: Final = 8 * 1024 * 1024
_TRIM_DELAY: Final = 1.0

#: The name the server's log gives the budget when it cuts a connection.
BUDGET_BOUND: Final = "buffer budget"
#: The names it gives the bounds a connection's own requests exceed (the connection applies
#: them: :mod:`rdzv.store.server._conn`, :class:`rdzv.store.state._kv.HeldTooMany`).
OVERSENT_BOUND: Final = "bytes sent while waiting"
HELD_BOUND: Final = "requests held behind a WAIT"
#: Bytes a connection may send while it waits, besides the keys of its wait (``may_hold``).
MAX_HELD_BYTES: Final = 1024 * 1024


def may_hold(keys: Sequence[bytes]) -> int:
    """Bytes a connection waiting for ``keys`` may send meanwhile: :data:`MAX_HELD_BYTES`,
    and as much again as the keys (rdzv's client follows a WAIT with a MULTI_GET of them)."""
    return MAX_HELD_BYTES + sum(map(len, keys)) + 8 * len(keys) + 9


def release_memory() -> None:
    """Hand the allocator's free pages back to the system (glibc's ``malloc_trim``; nothing
    where there is none). ``ctypes`` is imported only here: after an attack, never at start."""
    import ctypes  # lazily: it would cost every node's start

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


class Bounds:
    """The handshake deadline and the buffer budget of one server (see the module doc).

    :attr:`loop` (the server's loop: its clock and timers) is set when the server starts.

    Args:
        handshake_timeout: seconds a connection may take to complete its first request.
        stall_timeout: seconds a request must have been incomplete before the budget may
            cut its connection.
        budget: bytes of incomplete requests all connections may hold together.
        expire: called with a connection whose handshake deadline passed.
    """

    def __init__(
        self,
        handshake_timeout: float,
        stall_timeout: float,
        budget: int,
        expire: Callable[[Connection], None],
    ) -> None:
        self.loop: EventLoop  # set by the server's start()
        self.handshake_timeout = handshake_timeout
        self.stall_timeout = stall_timeout
        self.budget = budget
        self.expire = expire
        self.held = 0  # bytes of incomplete requests, all connections
        self.read_size = READ_SIZE  # of one read (less while the budget is spent)
        self.peak = 0  # the largest ``held`` seen
        self.unvalidated: dict[Connection, float] = {}  # accepted at, in that order
        self.partials: dict[Connection, float] = {}  # incomplete since, oldest first
        self.starved: dict[Connection, None] = {}  # not read until ``held`` falls
        self._timer: Timer | None = None
        self._relief: Timer | None = None  # looks at the stalled while some are starved
        self._trim: bool | Timer = False  # True: held passed TRIM_MARK; a Timer: trim due

    # --- the handshake deadline -----------------------------------------------------------

    def accepted(self, conn: Connection) -> None:
        """``conn`` was accepted: its first request is due within the handshake timeout."""
        self.unvalidated[conn] = self.loop.time()
        if self._timer is None:
            self._arm()

    def greeted(self, conn: Connection) -> None:
        """``conn`` completed its first request: the handshake deadline no longer applies."""
        self.unvalidated.pop(conn, None)

    def _arm(self) -> None:
        first = next(iter(self.unvalidated.values()))
        self._timer = self.loop.call_at(first + self.handshake_timeout, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        due = self.loop.time() - self.handshake_timeout
        late = []
        for conn, since in self.unvalidated.items():
            if since > due:
                break
            late.append(conn)
        for conn in late:
            del self.unvalidated[conn]
            self.expire(conn)
        if self.unvalidated:
            self._arm()

    # --- the buffer budget ------------------------------------------------------------

    def buffered(self, conn: Connection, before: int, after: int, began: bool) -> None:
        """``conn``'s incomplete request went from ``before`` to ``after`` bytes; ``began``:
        a new request started in this read (its clock starts now)."""
        self.held += after - before
        partials = self.partials
        if not after:
            partials.pop(conn, None)
        elif (began or not before) and conn not in self.starved:
            partials.pop(conn, None)
            partials[conn] = self.loop.time()  # the newest: the order stays by age
        held = self.held
        self.peak = max(self.peak, held)
        if held > TRIM_MARK and self._trim is False:
            self._trim = True
        if held > self.budget:
            self.read_size = SPENT_READ_SIZE
            self._relieve(conn)
        elif after < before:
            self._fell()

    def forget(self, conn: Connection, size: int) -> None:
        """``conn`` closed (or is being cut) holding ``size`` bytes of a request."""
        self.unvalidated.pop(conn, None)
        self.partials.pop(conn, None)
        self.starved.pop(conn, None)
        if size:
            self.held -= size
            self._fell()

    def _fell(self) -> None:
        if self.held <= self.budget:
            self.read_size = READ_SIZE
        if self.starved:
            if self.held <= self.budget:
                self._resume(len(self.starved))
            elif not self.partials:  # nobody is read: the oldest starved one goes on
                self._resume(1)
        if self._trim is True and self.held <= TRIM_MARK // 16:
            self._trim = self.loop.call_at(self.loop.time() + _TRIM_DELAY, self._release)

    def _release(self) -> None:
        self._trim = False
        release_memory()

    def _relieve(self, conn: Connection | None) -> None:
        """Over the budget after ``conn``'s read (None: on the timer): cut the stalled, else
        stop reading ``conn`` unless its request is the oldest one read (one always goes on)."""
        now = self.loop.time()
        stalled = []
        excess = self.held - self.budget
        for other, since in self.partials.items():
            if now - since < self.stall_timeout or excess <= 0:
                break
            if other.reading_paused:  # we are not reading it: not its stall
                continue
            stalled.append((other, now - since))
            excess -= other.partial
        detail = (
            f"the server holds {_mib(self.held)} of incomplete requests, over its budget of "
            f"{_mib(self.budget)}"
        )
        for other, age in stalled:
            other.cut(
                BUDGET_BOUND,
                f"{detail}, and this connection's request had been incomplete for "
                f"{age:.1f} s ({other.partial} bytes of it received)",
            )
        partials = self.partials
        if (
            self.held > self.budget
            and conn is not None
            and conn.partial
            and not conn.closing
            and next(iter(partials), None) is not conn
        ):
            partials.pop(conn, None)
            self.starved[conn] = None
            conn.starve(True)
        if self.starved and partials and self._relief is None:
            # The oldest request read may stall for good: look again when it is due.
            due = next(iter(partials.values())) + self.stall_timeout
            when = due if due > now else now + self.stall_timeout
            self._relief = self.loop.call_at(when, self._relieve_later)

    def _relieve_later(self) -> None:
        self._relief = None
        if self.held > self.budget:
            self._relieve(None)
        self._fell()

    def _resume(self, count: int) -> None:
        """Read ``count`` starved connections again, the longest starved first."""
        starved = self.starved
        now = self.loop.time()
        for conn in list(starved)[:count]:
            del starved[conn]
            if conn.partial:
                self.partials[conn] = now  # the time it was not read does not count
            conn.starve(False)
