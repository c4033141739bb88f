"""A member's join with its happy path written straight: the express.

In a fresh process every function runs cold, and a member's first join pays more for the
general join's layers (:class:`~rdzv.rendezvous._join.RoundProtocol` over
:class:`~rdzv.rendezvous._round_io.RoundIO`: each store call bounded, translated and
reported, each step routed by :mod:`rdzv.rendezvous._round_rules`) than for its requests.
:func:`join_express` makes the same requests, in the same writes and order, with those
layers inlined, for as long as every reply is the one a joining member expects:

1. the claims on ``first`` and on its rank are its own (or ``first`` is another node of its
   world size);
2. the hosting node arbitrates (``arbiter`` was set when it counted itself in);
3. the verdict is ``complete``.

:func:`member_script` is that path, a script for :func:`rdzv.store.client.express`, which
makes its store calls straight on the socket of a member's first connection (to a store
that serves a request sent behind a WAIT: an rdzv server) and hands them to the general
client at the first thing out of the ordinary there. At the first reply that is anything
else, the script returns the rest of the round as a step of the general join
(:class:`Then`: :meth:`RoundProtocol.after_claims`, :meth:`RoundProtocol.after_joining`,
:meth:`RoundProtocol.on_deadline`, :meth:`RoundVerdict.act_on`), with the replies in hand;
a store call that fails is raised by the general join as it raises its own
(:meth:`RoundIO.raise_store`), and a deadline that has passed leaves the step to the general
join. Its events are the general join's. So the express changes what a happy join costs,
never how any join ends. The hosting node never takes it (it arbitrates itself).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

from rdzv.errors import StoreError, StoreTimeoutError
from rdzv.rendezvous import _round_rules as rules
from rdzv.rendezvous._deadline import verdict_grace
from rdzv.rendezvous._round_io import call_bound
from rdzv.rendezvous._round_state import Identity, RoundKeys, confirmation, is_complete

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdzv.rendezvous._join import RoundProtocol
    from rdzv.store.client import HeldGet

    #: The rest of a round, in the general join: a step of ``protocol`` (given the read of
    #: the verdict's WAIT+GET, when one is outstanding).
    Then = Callable[[RoundProtocol, HeldGet | None], None]
    #: A store call of the script: the TCPStore method, its arguments, its timeout.
    Step = tuple[str, Any, float]

__all__ = ["ON", "acknowledgement", "member_script"]

#: Whether members take the express (tests turn it off to reach every step of the general
#: join with their faults; the express's own tests compare the two).
ON = True


def member_script(
    me: Identity,
    keys: RoundKeys,
    round_index: int,
    deadline: float,
    clock: Callable[[], float],
    event: Callable[..., None] | None,
) -> Generator[Step, Any, Then | None]:
    """Round ``round_index`` of this member (``me``, ``keys``), its deadline ``deadline`` on
    ``clock``, as a script for :func:`rdzv.store.client.express`; ``event`` emits a round
    event as the general join does (None: nobody listens). Returns None once the round is
    complete with every rank, else the rest of the round in the general join."""
    raw, k = me.raw, round_index
    left = deadline - clock()
    if left <= 0:  # past it, every call is bounded by the overshoot: the general join's
        return _general_join
    try:
        claims = [(keys.of(k, "first"), b"", raw), (keys.claim(k, me.rank), b"", raw)]
        raw_first, raw_holder = yield ("compare_sets", claims, left)
    except StoreError as exc:
        return _failed(exc, "calling compare_set")
    left = deadline - clock()
    if (
        raw_holder != raw
        or (raw_first != raw and not Identity.of_world_size(raw_first, me.world_size))
        or left <= 0
    ):
        return lambda p, held: p.after_claims(raw_first, raw_holder)
    # invariant 11 of rdzv.rendezvous._join: the seconds left, and the deadline itself
    at = deadline if clock is time.monotonic else None
    count = (
        keys.of(k, "count"),
        1,
        keys.confirmed(k, me.rank),
        confirmation(left, at, me),
        (keys.of(k, "joined"), f"{me.rank},"),
        keys.of(k, "arbiter"),
        keys.of(k, "done"),
    )
    try:
        joined, arbitrated = yield ("add_then_get", count, left)
    except StoreError as exc:
        return _failed(exc, "calling add")
    if not arbitrated:  # the hosting node does not decide: the general join's routes
        return lambda p, held: p.after_joining(joined, False, held)
    world_size = me.world_size
    watchman = bool(rules.watches_once_counted(joined, world_size, False, True))
    if event is not None:
        event("joined", joined=min(joined, world_size), world_size=world_size)
    remaining = deadline + verdict_grace(watchman) - clock()
    try:
        verdict = yield ("get_held", (), max(remaining, 0.0))  # one there is read even past it
    except StoreTimeoutError:
        return _then(lambda p: p.on_deadline(), watchman)
    except StoreError as exc:
        return _failed(exc, "waiting for the other nodes", watchman)
    if not is_complete(verdict):
        return _then(lambda p: p.verdict.act_on(verdict), watchman)
    try:
        yield acknowledgement(keys, k, me.rank, call_bound(deadline, clock()))
    except StoreError as exc:
        return _failed(exc, "calling set", watchman, read_verdict=True)
    if event is not None:
        event("complete", world_size=world_size)
    return None


def acknowledgement(keys: RoundKeys, round_index: int, rank: int, seconds: float) -> Step:
    """The store call that says this member read the verdict (as
    :meth:`RoundVerdict.acknowledge` says it), bounded by ``seconds``."""
    return ("set", (keys.of(round_index, f"ack/{rank}"), b"1"), seconds)


def _general_join(p: RoundProtocol, held: HeldGet | None) -> None:
    p.join_general()


def _then(step: Callable[[RoundProtocol], object], watchman: bool) -> Then:
    """``step`` of the general join, by a member whose watch the express decided."""

    def then(p: RoundProtocol, held: HeldGet | None) -> None:
        p.watchman = watchman
        step(p)

    return then


def _failed(
    exc: StoreError, doing: str, watchman: bool | None = None, read_verdict: bool = False
) -> Then:
    """What the store failure ``exc`` while ``doing`` stands for, raised by the general
    join as it raises its own (a lost connection is published first, invariant 7)."""

    def then(p: RoundProtocol, held: HeldGet | None) -> None:
        if watchman is not None:
            p.watchman = watchman
        p.io.read_verdict = read_verdict
        p.io.raise_store(exc, doing)

    return then
