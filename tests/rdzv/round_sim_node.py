"""One node of the round's simulation (tests/rdzv/round_sim.py): the join of
rdzv.rendezvous._join as a generator that yields store operations and asks the round's rules
(rdzv.rendezvous._round_rules, or a patched copy with a planted bug) what follows.

It mirrors ``RoundProtocol``'s requests in order (claim, takeover, arbiter, count and
confirmation, joined, the route after joining, completion, the wait for the verdict, the
election and diagnosis past the deadline, the late read); each ``yield`` is one atomic store
operation the scheduler may interleave with any other node's, delay, or never run (a crash).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from rdzv.rendezvous._deadline import (
    LATE_READ,
    VERDICT_RESERVE,
    WAIT_FOR_DIAGNOSER,
)
from rdzv.rendezvous._deadline import verdict_grace as real_verdict_grace

TIMEOUT = object()  # what a get answers when its deadline passed first
FIRST_POLL, CONFIRM_POLL, MAX_TAKEOVERS = 0.01, 0.5, 8

Op = tuple[Any, ...]
NodeGen = Generator[Op, Any, tuple[str, Any]]


@dataclass
class Proc:
    """One process: an incarnation of a rank (or the host's member-lost check)."""

    pid: int
    rank: int
    started: float
    deadline: float
    hard_end: float
    hosts: bool = False  # runs the store in-process: arbitrates (invariant 10)
    gen: NodeGen | None = None
    op: Op | None = None  # the operation it waits to run
    result: tuple[str, Any] | None = None
    crashed: bool = False
    broken: bool = False  # its store connection broke (the process runs on)
    watchman: bool = True
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        return f"{self.rank}:{self.pid}"


def pid_of(ident: str) -> int:
    return int(ident.split(":")[1])


def verdict(status: str, by: Proc, **fields: Any) -> dict[str, Any]:
    return {"status": status, "by": by.ident, **fields}


def member(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """The join of rank ``p.rank`` (``RoundProtocol._join``)."""
    n, r = sim.n, p.rank
    yield ("cas", "first", "", p.ident)  # every simulated node has the same world size
    if not rules.world_sizes_agree(n, sim.n):
        return ("refused", "world_size_mismatch")
    claim = f"claim/{r}"
    holder = yield ("cas", claim, "", p.ident)
    if holder != p.ident:
        for _ in range(MAX_TAKEOVERS):
            if not rules.may_take_over(True, sim.alive(pid_of(holder))):
                break
            if (yield ("check", ["done"])):
                return (yield from refuse(sim, p, rules))
            holder = yield ("cas", claim, holder, p.ident)
            if holder == p.ident:
                p.facts["took_over"] = pid_of(holder)
                break
        if holder != p.ident:
            aborted = verdict("aborted", p, reason="duplicate_rank")
            yield ("cas", "done", "", aborted)
            return (yield from refuse(sim, p, rules))
    if p.hosts:
        yield ("set", "arbiter", p.ident)
    due = (p.deadline, p.ident)
    if sim.atomic_confirm:  # rdzv's add_then_set: one write
        joined = yield ("add_then_set", "count", 1, f"confirmed/{r}", due)
    else:  # a store without it (torch's): two requests
        joined = yield ("add", "count", 1)
        yield ("set", f"confirmed/{r}", due)
    yield ("append", "joined", r)
    arbitrated = None
    if sim.held and not p.hosts:  # rdzv's add_then_get: the CHECK rides with the count
        arbitrated = bool((yield ("check", ["arbiter"])))
    p.watchman = rules.watches(joined, sim.watchmen)
    if rules.asks_for_arbiter(p.watchman, p.hosts, joined, n) and sim.now < p.deadline:
        if arbitrated is None:
            arbitrated = bool((yield ("check", ["arbiter"])))
        p.watchman = not arbitrated
    route = rules.after_joining(joined, n, p.hosts, arbitrated)
    if route == "decide":
        return (yield from decide(sim, p, rules))
    if route == "complete_when_confirmed":
        return (yield from complete_when_confirmed(sim, p, rules))
    return (yield from await_verdict(sim, p, rules))


def decide(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """The hosting node (``RoundProtocol._decide``; the watch is the simulation's)."""
    outcome = yield ("decide",)
    if outcome == "complete":
        raw = yield ("cas", "done", "", verdict("complete", p))
        return act_on(p, raw, rules)
    if outcome == "verdict":
        raw = yield ("get", "done", p.hard_end)
        return act_on(p, raw, rules)
    if outcome == "member_deadline":  # named at once from what the watch saw (invariant 11)
        seen = set(sim.watch.confirmed)
        missing = rules.missing_ranks(seen, sim.n)
        return (yield from publish(sim, p, rules, missing, seen))
    return (yield from on_deadline(sim, p, rules))


def complete_when_confirmed(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """The node whose add filled ``count`` (``RoundProtocol._complete_when_confirmed``)."""
    confirmations = [f"confirmed/{r}" for r in range(sim.n)]
    pause = FIRST_POLL
    while True:
        every = bool((yield ("check", confirmations)))
        hosted = every and bool((yield ("check", ["arbiter"])))
        completes = rules.completes(every, hosted)
        if completes:
            raw = yield ("cas", "done", "", verdict("complete", p))
            return act_on(p, raw, rules)
        if completes is False:
            return (yield from await_verdict(sim, p, rules))
        if (yield ("check", ["done"])):
            raw = yield ("get", "done", p.hard_end)
            return act_on(p, raw, rules)
        if sim.now >= p.deadline:
            break
        yield ("sleep", min(sim.now + pause, p.deadline))
        pause = min(pause * 2, CONFIRM_POLL)
    return (yield from on_deadline(sim, p, rules))


def await_verdict(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """``RoundProtocol._await_verdict``: one wait on ``done``, bounded."""
    raw = yield ("get", "done", p.deadline + real_verdict_grace(p.watchman))
    if raw is TIMEOUT:
        return (yield from on_deadline(sim, p, rules))
    return act_on(p, raw, rules)


def on_deadline(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """``_deadline.timeout_verdict``: the election, the diagnosis, the late read."""
    chosen = None  # its wait ended late: no time left for the election
    if sim.now < p.hard_end - VERDICT_RESERVE:
        chosen = rules.elected((yield ("add", "diagnosing", 1)))
    step = rules.after_deadline(chosen, p.watchman)
    if step == "diagnose":
        return (yield from diagnose(sim, p, rules))
    if step == "read_late":
        return (yield from read_late(sim, p, rules))
    raw = yield ("get", "done", p.deadline + WAIT_FOR_DIAGNOSER)
    if raw is not TIMEOUT:
        return act_on(p, raw, rules)
    return (yield from diagnose(sim, p, rules))


def diagnose(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """``_deadline._diagnose``: the joined list, the missing ranks' claims; then publish."""
    raw = yield ("get", "joined", p.hard_end - VERDICT_RESERVE)
    if raw is TIMEOUT:
        return (yield from read_late(sim, p, rules))
    seen = set(sim.last_read)  # the list as the store held it (the checks' ground truth)
    joined = rules.ranks_in(raw, sim.n)
    missing = rules.missing_ranks(joined, sim.n)
    for rank in rules.ranks_to_ask(missing):
        yield ("check", [f"claim/{rank}"])
    return (yield from publish(sim, p, rules, missing, seen))


def publish(sim: Any, p: Proc, rules: Any, missing: list[int], seen: set[int]) -> NodeGen:
    """``_deadline.publish_verdict``: the timeout verdict naming ``missing``."""
    proposal = verdict("aborted", p, reason="timeout", missing=missing, seen=sorted(seen))
    raw = yield ("cas", "done", "", proposal)
    return act_on(p, raw, rules)


def read_late(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """``_deadline._read_or_fail``: one read of the verdict that exists, else this member's
    own ('not determined') proposed, and the verdict that won acted on."""
    raw = yield ("get", "done", max(sim.now + LATE_READ, p.hard_end))
    if raw is TIMEOUT:
        proposal = verdict("aborted", p, reason="timeout", missing=None, seen=[])
        raw = yield ("cas", "done", "", proposal)
    return act_on(p, raw, rules)


def refuse(sim: Any, p: Proc, rules: Any) -> NodeGen:
    """``RoundVerdict.refuse``: a non-member reads the verdict and reports it."""
    raw = yield ("get", "done", p.hard_end)
    if raw is TIMEOUT:
        return ("refused", "no_verdict")
    return ("refused", rules.refusal(raw["status"], closed=False))


def act_on(p: Proc, raw: Any, rules: Any) -> tuple[str, Any]:
    """``RoundVerdict.act_on``: success exactly on a complete verdict (invariants 1, 3)."""
    return ("ok", raw) if rules.is_success(raw) else ("failed", raw)


def lost_check(sim: Any, rank: int, vanished: str, rules: Any) -> NodeGen:
    """The host's member-lost check ``MEMBER_GRACE`` after a claim's connection closed
    (``LostMemberWatch._abort_if_gone``, invariant 8)."""
    yield ("sleep", sim.now + sim.grace)
    has_verdict = bool((yield ("check", ["done"])))
    claim_now = None if has_verdict else (yield ("get", f"claim/{rank}", sim.now))
    if rules.member_lost(has_verdict, claim_now, vanished):
        host = sim.host
        yield ("cas", "done", "", verdict("aborted", host, reason="member_lost", lost=vanished))
    return ("check", None)
