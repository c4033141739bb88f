"""When a connect tries again, and how long one attempt may wait for an answer (pure).

The caller's ``random.Random`` draws every jitter; nothing here reads a clock or sleeps, so
a schedule is a sequence of numbers that a test can read whole.

Invariants:

1. No attempt waits for an answer longer than :data:`ATTEMPT_CAP`: the first waits up to
   :data:`ATTEMPT_FIRST`, each one after an unanswered attempt twice as long, capped; each
   bound is drawn between 3/4 of that and all of it, so nodes that started together do not
   send their SYNs in waves. One ``connect()`` for the whole budget would wait for the
   kernel's next SYN retransmission, seconds apart after the first few (0, 1, 3, 7, 15 s, or
   0, 1, 2, 3, 4, 5, 7, 11, 19 s with linear timeouts), so a path that heals late in a join
   would not be used before the deadline.
2. After an unanswered attempt the next one starts within :data:`NO_ANSWER_PAUSE` (full
   jitter): the attempt has already waited. Within a 2 s attempt the kernel retransmits its
   SYN once, at 1 s, so while nothing answers a node sends about one SYN a second (the pace of
   the kernel's own first retransmissions, never faster) and a path that heals is used within
   about a second, whenever it heals. A host whose accept queue is full drops SYNs like a
   firewall, and gets the same pace, not a storm.
3. After a refusal within :data:`FAST_WINDOW` of the start, the next attempt comes after
   :data:`FAST_RETRY` (jittered): the host answered at once, only its store is not listening
   yet (a node 0 late by a few ms must not cost its peers a long back-off).
4. After any other failure (a refusal later, a reset, no route, a name that does not resolve,
   a peer that is not a store) the pause backs off exponentially with jitter (:class:`Backoff`,
   25 ms doubling to 1 s).
"""

from __future__ import annotations

from rdzv.store.client._causes import _NoAnswer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Protocol

    class Draws(Protocol):
        """Where the jitter comes from: the caller's ``random.Random`` (or a ``LazyRandom``)."""

        def uniform(self, a: float, b: float, /) -> float: ...


__all__ = [
    "ATTEMPT_CAP",
    "ATTEMPT_FIRST",
    "FAST_RETRY",
    "FAST_WINDOW",
    "NO_ANSWER_PAUSE",
    "Backoff",
    "Schedule",
    "retry_pause",
]


#: Seconds from the start of a connect during which a refused attempt is retried after
#: :data:`FAST_RETRY` (with jitter: between half of it and all of it).
FAST_WINDOW: Final = 1.0
FAST_RETRY: Final = 0.02
#: Seconds the first connection attempt waits for an answer, and the most any attempt does.
ATTEMPT_FIRST: Final = 1.0
ATTEMPT_CAP: Final = 2.0
#: The most seconds between an unanswered attempt and the next one.
NO_ANSWER_PAUSE: Final = 0.25


class Backoff:
    """Exponential backoff with jitter: sleep ``uniform(c / 4, c)``, ``c = min(cap,
    initial * 2**n)``."""

    __slots__ = ("attempt", "cap", "initial", "rng")

    def __init__(
        self, rng: Draws, initial: float = 0.025, cap: float = 1.0, attempt: int = 0
    ) -> None:
        self.rng = rng
        self.initial = initial
        self.cap = cap
        self.attempt = attempt

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.initial * 2**self.attempt)
        self.attempt += 1
        return self.rng.uniform(ceiling / 4, ceiling)


def retry_pause(last: BaseException | None, since_start: float, backoff: Backoff) -> float:
    """Seconds to wait before the next attempt, given why the last one failed and how long
    ago the connect started: a short jittered pause after an unanswered attempt (it already
    waited), :data:`FAST_RETRY` (jittered) after a refusal within :data:`FAST_WINDOW`, else
    the backoff's next delay."""
    if isinstance(last, _NoAnswer):
        return backoff.rng.uniform(0.0, NO_ANSWER_PAUSE)
    if isinstance(last, ConnectionRefusedError) and since_start < FAST_WINDOW:
        return backoff.rng.uniform(FAST_RETRY / 2, FAST_RETRY)
    return backoff.next_delay()


class Schedule:
    """One connect's retry schedule: how long the next attempt may wait for an answer
    (:meth:`attempt_bound`) and how long to pause after a failed one (:meth:`pause`)."""

    __slots__ = ("backoff", "unanswered")

    def __init__(self, rng: Draws) -> None:
        self.backoff = Backoff(rng)
        self.unanswered = 0  # attempts so far that got no answer at all

    def attempt_bound(self) -> float:
        """Seconds the next connection attempt may wait for the host to answer."""
        nominal = min(ATTEMPT_CAP, ATTEMPT_FIRST * 2**self.unanswered)
        return self.backoff.rng.uniform(0.75 * nominal, nominal)

    def pause(self, last: BaseException | None, since_start: float) -> float:
        """Seconds to wait after an attempt that failed with ``last``, ``since_start``
        seconds after the connect began."""
        if isinstance(last, _NoAnswer):
            self.unanswered += 1
        return retry_pause(last, since_start, self.backoff)
