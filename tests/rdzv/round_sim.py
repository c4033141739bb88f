"""A deterministic simulation of one round of the static rendezvous.

N nodes (tests/rdzv/round_sim_node.py: the join as generators that ask the real rules of
rdzv.rendezvous._round_rules) run over an in-memory store with rdzv's semantics
(compare_set, add, set, append, check, get that waits with a deadline), on a virtual clock.
One schedule is a sequence of choices: which runnable node takes its next store operation,
or to let time pass (a delay: the clock jumps to the next deadline or timer), crash a node
(its connection closes; the hosting node's watch sees it, invariant 8), restart a crashed
rank (a new process that takes its claim over, invariant 6), or start a duplicate of a rank
(a live second process). When no node can run, the clock advances to the earliest timer.

Choice 0 is always the default (the node that ran last goes on, else the first runnable
one), so :func:`explore` enumerates every schedule with at most ``deviations`` non-default
choices (preemption bounding) and hypothesis draws choice lists (tests/rdzv/
test_round_simulation.py). After each step and at the end, :meth:`Sim.violations` checks
the invariants: one verdict and the same world for every member that returns success, no
rank twice in it, a complete round only with every rank confirmed (2) and, where the host
arbitrates, no member whose connection closed (10); no live claim taken over (6); every
timeout verdict names exactly the ranks that had not joined when they were read (11).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from round_sim_node import TIMEOUT, Proc, lost_check, member, pid_of

from rdzv.rendezvous import _round_rules
from rdzv.rendezvous._lost_member import MEMBER_GRACE
from rdzv.rendezvous._round_io import OVERSHOOT

JOIN_TIMEOUT = 10.0
MAX_STEPS = 600


@dataclass(frozen=True)
class Config:
    """One simulated round: ``n`` ranks, whether rank 0 hosts the store and arbitrates, the
    watchmen, rdzv's one-write confirmation or torch's two, whether a member CHECKs
    ``arbiter`` with its count and routes on it (``held``: rdzv's ``add_then_get``), and
    the fault budgets."""

    n: int = 3
    hosted: bool = True
    watchmen: int = 8
    atomic_confirm: bool = True
    held: bool = True
    crashes: int = 1
    restarts: int = 1
    duplicates: int = 0
    breaks: int = 0


class Watch:
    """The hosting node's member watch (``LostMemberWatch``), fed by the store's writes and
    by connections closing, as the server's writer watch feeds it."""

    def __init__(self) -> None:
        self.confirmed: set[int] = set()
        self.pending: dict[int, str] = {}
        self.ended = False
        self.due: float | None = None


class Sim:
    """One run of one schedule; ``choose(options)`` picks the index of the next choice."""

    def __init__(self, cfg: Config, choose: Callable[[list[Any]], int], rules: Any) -> None:
        self.cfg, self.choose, self.rules = cfg, choose, rules
        self.n, self.watchmen, self.atomic_confirm = cfg.n, cfg.watchmen, cfg.atomic_confirm
        self.held = cfg.held
        self.grace = MEMBER_GRACE
        self.now = 0.0
        self.kv: dict[str, Any] = {}
        self.writer: dict[str, int] = {}  # key -> pid of the connection that last wrote it
        self.procs: list[Proc] = []
        self.checks: list[Proc] = []
        self.watch = Watch()
        self.last_read: list[int] = []
        self.errors: list[str] = []
        self.trace: list[tuple[int, tuple[Any, ...]]] = []  # (rank, request) in order
        self.budget = {
            "crash": cfg.crashes,
            "restart": cfg.restarts,
            "dup": cfg.duplicates,
            "break": cfg.breaks,
        }
        self.closed: set[int] = set()  # pids whose store connection closed
        self.host = self._start(0) if cfg.hosted else None
        for rank in range(0 if self.host is None else 1, cfg.n):
            self._start(rank)
        self.last: Proc | None = None
        self.steps = 0

    # -- processes ----------------------------------------------------------------------

    def _start(self, rank: int) -> Proc:
        hosts = self.cfg.hosted and rank == 0 and not self.procs
        deadline = self.now + JOIN_TIMEOUT
        p = Proc(len(self.procs) + 100, rank, self.now, deadline, deadline + OVERSHOOT, hosts)
        p.gen = member(self, p, self.rules)
        p.op = next(p.gen)
        self.procs.append(p)
        return p

    def alive(self, pid: int) -> bool:
        """Whether process ``pid`` runs (also once it returned from its join)."""
        return any(p.pid == pid and not p.crashed for p in self.procs)

    def _crash(self, p: Proc) -> None:
        p.crashed, p.op = True, None
        self._close(p)

    def _close(self, p: Proc) -> None:
        self.closed.add(p.pid)
        for key, pid in self.writer.items():  # the server sees the connection close
            if pid == p.pid and key.startswith("claim/") and self.cfg.hosted:
                self._on_close(int(key.split("/")[1]), self.kv[key])

    def _on_close(self, rank: int, value: str) -> None:
        if not self.rules.loss_watched(rank == 0, False, self.watch.ended):
            return
        self.watch.pending[rank] = value
        check = Proc(len(self.procs) + len(self.checks) + 900, rank, self.now, 0.0, 0.0)
        check.gen = lost_check(self, rank, value, self.rules)
        check.op = next(check.gen)
        self.checks.append(check)

    # -- the store ----------------------------------------------------------------------

    def _write(self, p: Proc, key: str, value: Any) -> None:
        before = self.kv.get(key)
        self.kv[key] = value
        self.writer[key] = p.pid
        if key.startswith("confirmed/"):
            self.watch.confirmed.add(int(key.split("/")[1]))
            due = value[0]
            self.watch.due = due if self.watch.due is None else min(self.watch.due, due)
        elif key.startswith("claim/"):
            rank = int(key.split("/")[1])
            if before is not None and self.watch.pending.get(rank, value) != value:
                del self.watch.pending[rank]
            if before is not None and self.alive(pid_of(before)):
                self.errors.append(f"invariant 6: {p.ident} took over the live claim {before}")
        elif key == "done":
            self.watch.ended = True
            self._on_verdict(value)

    def _on_verdict(self, v: dict[str, Any]) -> None:
        if v["status"] == "complete":
            unconfirmed = [r for r in range(self.n) if f"confirmed/{r}" not in self.kv]
            if unconfirmed:
                self.errors.append(f"invariant 2: complete without confirmed {unconfirmed}")
        elif v.get("reason") == "timeout" and v["missing"] is not None:
            expected = [r for r in range(self.n) if r not in v["seen"]]
            if v["missing"] != expected:
                self.errors.append(
                    f"invariant 11: verdict names {v['missing']}, {expected} had not joined"
                )

    def _ready(self, p: Proc) -> bool:
        op = p.op
        if op is None:
            return False
        if p.broken:
            return True  # whatever it waits for fails at once
        if op[0] == "get":
            return op[1] in self.kv or self.now >= op[2]
        if op[0] == "sleep":
            return self.now >= op[1]
        if op[0] == "decide":
            return self._host_outcome(p) is not None
        return True

    def _host_outcome(self, p: Proc) -> str | None:
        w = self.watch
        due_left = None if w.due is None else w.due - self.now
        return self.rules.host_decision(  # type: ignore[no-any-return]
            w.ended, False, w.confirmed, self.n, w.pending, p.deadline - self.now, due_left
        )

    def _run(self, p: Proc) -> Any:
        op, kv = p.op, self.kv
        assert op is not None
        kind = op[0]
        if kind == "cas":
            _, key, expected, new = op
            current = kv.get(key, "")
            if current == expected:
                if key not in kv and expected != "":
                    return expected  # torch's compare_set on a missing key
                self._write(p, key, new)
            return kv[key]
        if kind in ("add", "add_then_set"):
            kv[op[1]] = kv.get(op[1], 0) + op[2]
            if kind == "add_then_set":
                self._write(p, op[3], op[4])
            return kv[op[1]]
        if kind == "set":
            self._write(p, op[1], op[2])
            return None
        if kind == "append":
            kv[op[1]] = [*kv.get(op[1], []), op[2]]
            return None
        if kind == "check":
            return all(key in kv for key in op[1])
        if kind == "get":
            if op[1] not in kv:
                return TIMEOUT
            value = kv[op[1]]
            if op[1] == "joined":
                self.last_read = list(value)
                return "".join(f"{r}," for r in value).encode()
            return value
        if kind == "sleep":
            return None
        if kind == "decide":
            outcome = self._host_outcome(p)
            if outcome == "complete":  # a member lost after this is the exit barrier's
                self.watch.ended = True
                pids = [pid_of(kv[f"claim/{r}"]) for r in range(self.n)]
                dead = [
                    r for r, pid in enumerate(pids) if pid in self.closed or not self.alive(pid)
                ]
                if dead:
                    self.errors.append(f"invariant 10: complete with dead members {dead}")
            return outcome
        raise AssertionError(op)

    def _lose(self, p: Proc) -> None:
        """``p``'s next request fails: its connection broke (``RoundIO.raise_store``)."""
        p.op = None
        if not self.rules.publishes_loss(True, p.deadline - self.now):
            p.result = ("failed", "timeout")  # too late to tell the others (invariant 9)
            return
        fresh = Proc(p.pid + 5000, p.rank, self.now, p.deadline, p.hard_end)
        if "done" not in self.kv:  # compare_set("", ...) over a fresh connection
            self._write(fresh, "done", {"status": "aborted", "by": p.ident, "reason": "lost"})
        p.result = ("failed", "connection_lost")
        self.last = p
        self.steps += 1

    def _step(self, p: Proc) -> None:
        if p.broken:
            self._lose(p)
            return
        assert p.op is not None
        self.trace.append((p.rank, p.op))
        value = self._run(p)
        assert p.gen is not None
        try:
            p.op = p.gen.send(value)
        except StopIteration as stop:
            p.op, p.result = None, stop.value
        self.last = p
        self.steps += 1

    # -- the schedule -------------------------------------------------------------------

    def _timers(self) -> list[float]:
        times = []
        for p in self.procs + self.checks:
            if p.op is not None and p.op[0] in ("get", "sleep"):
                times.append(p.op[2] if p.op[0] == "get" else p.op[1])
            if p.op is not None and p.op[0] == "decide":
                times += [p.deadline] + ([] if self.watch.due is None else [self.watch.due])
        return sorted(t for t in times if t > self.now)

    def options(self) -> list[tuple[str, Any]]:
        runnable = [p for p in self.procs + self.checks if self._ready(p)]
        if self.last in runnable:
            runnable.remove(self.last)
            runnable.insert(0, self.last)
        opts: list[tuple[str, Any]] = [("run", p) for p in runnable]
        timers = self._timers()
        if timers:
            opts.append(("delay", timers[0]))
        live = [p for p in self.procs if p.result is None and not p.crashed and not p.hosts]
        if self.budget["crash"]:
            opts += [("crash", p) for p in live]
        if self.budget["restart"]:
            ranks = {p.rank for p in self.procs if p.crashed}
            ranks -= {p.rank for p in self.procs if not p.crashed and p.result is None}
            opts += [("restart", r) for r in sorted(ranks)]
        if self.budget["dup"]:
            opts += [("dup", r) for r in sorted({p.rank for p in live})]
        if self.budget["break"]:
            opts += [("break", p) for p in live if not p.broken]
        return opts

    def run(self) -> list[str]:
        """Run the schedule to its end; return the invariants it broke."""
        while self.steps < MAX_STEPS:
            opts = self.options()
            if not opts:
                break
            kind, arg = opts[self.choose(opts) if len(opts) > 1 else 0]
            if kind == "run":
                self._step(arg)
            elif kind == "delay":
                self.now = arg
            elif kind == "crash":
                self.budget["crash"] -= 1
                self._crash(arg)
            elif kind == "break":
                self.budget["break"] -= 1
                arg.broken = True
                self._close(arg)
            elif kind == "restart":
                self.budget["restart"] -= 1
                self.last = self._start(arg)
            else:
                self.budget["dup"] -= 1
                self.last = self._start(arg)
        return self.errors + self.violations()

    def violations(self) -> list[str]:
        """The invariants the finished schedule broke (see the module doc)."""
        errors = []
        stuck = [p.ident for p in self.procs if not p.crashed and p.result is None]
        if stuck:
            errors.append(f"never returned: {stuck} (steps {self.steps})")
        winners = [p for p in self.procs if p.result and p.result[0] == "ok"]
        worlds = {repr(p.result[1]) for p in winners if p.result}
        if len(worlds) > 1:
            errors.append(f"two worlds: {worlds}")
        ranks = [p.rank for p in winners]
        if len(ranks) != len(set(ranks)):
            errors.append(f"a rank twice in the world: {sorted(ranks)}")
        if self.gave_up():
            errors.append(f"complete, though ranks {self.gave_up()} gave up on the round")
        return errors

    def gave_up(self) -> list[int]:
        """The ranks whose process failed on a round that completed, though it neither
        crashed nor lost its connection: it gave up on its own verdict ("could not be
        determined") and never wrote it."""
        verdict = self.kv.get("done", {})
        if verdict.get("status") != "complete":
            return []
        failed = [p for p in self.procs if p.result is not None and p.result[0] == "failed"]
        return [p.rank for p in failed if not (p.crashed or p.broken)]


def replay(choices: list[int]) -> Callable[[list[Any]], int]:
    """A chooser that follows ``choices`` (modulo the options), then the default."""
    it = iter(choices)
    return lambda opts: next(it, 0) % len(opts)


def simulate(cfg: Config, choices: list[int], rules: Any = _round_rules) -> list[str]:
    return Sim(cfg, replay(choices), rules).run()


def explore(
    cfg: Config, deviations: int, rules: Any = _round_rules
) -> Iterator[tuple[list[int], list[str]]]:
    """Every schedule of ``cfg`` with at most ``deviations`` non-default choices, depth
    first: yields each schedule's choices and the invariants it broke."""
    stack: list[list[int]] = [[]]
    while stack:
        prefix = stack.pop()
        made: list[tuple[int, int]] = []  # (choice, how many options) per choice point

        def choose(opts: list[Any], prefix: list[int] = prefix, made: list[Any] = made) -> int:
            choice = prefix[len(made)] if len(made) < len(prefix) else 0
            made.append((choice, len(opts)))
            return choice

        errors = Sim(cfg, choose, rules).run()
        yield [c for c, _ in made], errors
        if sum(1 for c in prefix if c) >= deviations:
            continue
        for i in range(len(made) - 1, len(prefix) - 1, -1):
            for alt in range(made[i][1] - 1, 0, -1):
                stack.append([c for c, _ in made[:i]] + [alt])


def rate(seconds: float = 60.0) -> float:
    """Schedules checked per minute: every configuration of the exhaustive grid in turn,
    up to three deviations, for ``seconds`` of wall time."""
    import itertools
    import time

    cfgs = [Config(n=2), Config(n=3), Config(n=3, hosted=False, watchmen=1)]
    began, count = time.monotonic(), 0
    for cfg in itertools.cycle(cfgs):
        for _, errors in explore(cfg, 3):
            assert not errors, errors
            count += 1
            if time.monotonic() - began >= seconds:
                return count * 60.0 / seconds
    raise AssertionError("unreachable")


if __name__ == "__main__":  # python tests/rdzv/round_sim.py [seconds]
    import sys

    print(f"{rate(float(sys.argv[1]) if len(sys.argv) > 1 else 60.0):.0f} schedules/minute")
