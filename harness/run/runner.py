"""Run one scenario in a world: start its nodes, act its faults on schedule, judge the result.

One seeded ``random.Random`` drives every choice the harness makes (it names the run and
seeds the world's own randomness: toxicity rolls, jitter); the seed is in the report.

The runner knows no fault kind by name. Before anything starts it asks each fault what the
world must build (:meth:`~harness.scenario.faults.base.Fault.shape`) and whether the world
can do what the fault needs (else :class:`~harness.errors.UnsupportedError`); then each
fault acts through its own :meth:`~harness.scenario.faults.base.Fault.inject` -- at
start-up, at a time offset, or a chosen delay after a node's event -- and the heal it
returns runs after the fault's duration, or at the end of the run, whichever comes first.
The nodes start together: the world starts each one (it says ``ready`` and waits at the
world's start gate), the runner waits until all are ready, then releases them at once
(:meth:`~harness.world.base.World.release`). The scenario's clock starts at the release
(faults' times, ``late_start`` delays and hard deadlines count from it); the time spent
starting is reported apart (``Report.startup``), and so is how far apart the nodes saw the
release (``Report.release_skew``). Every node gets a hard deadline: past it, it is killed
and reported ``hung``. When the run
is over the world is torn down, each fault counts what it did into its
:class:`~harness.scenario.faults.record.FaultRecord` (its tallies), and the checks judge.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from harness.errors import HarnessError
from harness.run.checks import check
from harness.run.context import FaultContext, NodeState
from harness.run.jobs import job_spec
from harness.run.model import NodeEvent, Report
from harness.run.outcomes import node_outcome, part_outcome
from harness.run.schedule import Schedule
from harness.run.starts import Starts
from harness.run.startup import await_ready, release_skew
from harness.run.unfired import unfired_records
from harness.run.worlds import check_supported, worlds_for
from harness.scenario.faults.base import Fault
from harness.scenario.faults.record import FaultRecord
from harness.scenario.model import Scenario
from harness.world.base import Interruptible, Launch, Layout, WorldFactory
from harness.world.messages import NODE, Event, Exit, Message, Outcome, Ready, Started
from harness.world.process.jobs.spec import JOB_BACKEND

__all__ = ["run_scenario", "worlds_for"]  # worlds_for: from harness.run.worlds, as before

_LAUNCHERS = 4  # concurrent node starts (a start mostly waits on I/O)


class _Run:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        worlds: WorldFactory,
        stop: threading.Event | None = None,
    ) -> None:
        self.sc = scenario
        self.faults = list(enumerate(scenario.fault))
        check_supported(worlds, self.faults, job=scenario.job is not None)
        self.job = job_spec(scenario)
        self.stop = stop if stop is not None else threading.Event()  # set: Ctrl-C
        self.seed = seed
        self.rng = random.Random(seed)
        tag = f"{scenario.name}-{uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]}"
        self.cond = threading.Condition()
        self.inbox: list[Message] = []
        self.world = worlds(_layout(scenario, tag, self.faults), self._deliver)
        if isinstance(self.world, Interruptible):  # its start-up gives up on Ctrl-C
            self.world.interrupt_on(self.stop)
        self.nodes = {i: NodeState() for i in range(scenario.nodes)}
        self.schedule = Schedule()
        self.starts = Starts(self.schedule, self.nodes, lambda node: self.start_nodes([node]))
        self.records: list[FaultRecord] = []
        self.tallies: list[Callable[[], None]] = []
        self.triggers: dict[tuple[int, str], list[Callable[[], None]]] = {}
        self.heals: dict[int, Callable[[], None]] = {}  # pending heals, by ticket
        self._tickets = itertools.count()
        self.starting = True  # until the first nodes start
        self.deferred: dict[int, tuple[float, Callable[[], None], int]] = {}
        self.t0 = 0.0
        self.released = False  # the clock reads 0 until the nodes are released
        self.first: list[int] = []  # the nodes released together
        self.startup: float | None = None

    # --- plumbing ------------------------------------------------------------------

    def _deliver(self, message: Message) -> None:
        with self.cond:
            self.inbox.append(message)
            self.cond.notify()

    def now(self) -> float:
        return time.monotonic() - self.t0 if self.released else 0.0

    # --- nodes -----------------------------------------------------------------------

    def launch_of(self, node: int) -> Launch:
        """How node ``node`` starts: its overrides, then what each fault changes."""
        sc = self.sc
        rank, world_size, config = node, sc.nodes, {}
        for override in sc.override:
            if node in override.nodes:
                rank = override.rank if override.rank is not None else rank
                world_size = override.world_size or world_size
                config.update(override.config)
        launch = Launch(
            node=node,
            backend=sc.backend,
            run_id=sc.run_id or sc.name,
            rank=rank,
            world_size=world_size,
            join_timeout=sc.timeouts.join,
            config=config,
            incarnation=max(1, self.nodes[node].incarnation),
            job=self.job,
        )
        for _, fault in self.faults:
            launch = fault.prepare(launch)
        return launch

    def start_nodes(self, nodes: list[int]) -> None:
        """Start nodes, a few at a time, then arm each one's hard deadline."""
        for node in nodes:
            state = self.nodes[node]
            state.pending = None
            state.outcome, state.status, state.finished = None, None, None
            state.incarnation += 1
        if len(nodes) == 1:
            self._launch(nodes[0])
        else:
            with ThreadPoolExecutor(_LAUNCHERS, thread_name_prefix="harness-launch") as pool:
                list(pool.map(self._launch, nodes))
        for node in nodes:
            state = self.nodes[node]
            assert state.started is not None
            self.schedule.at(
                state.started + self.sc.timeouts.hard_deadline,
                partial(self._hard_deadline, node, state.incarnation),
            )

    def _launch(self, node: int) -> None:
        state = self.nodes[node]
        state.launch = self.launch_of(node)
        state.started = self.now()
        self.world.start(state.launch)

    def start_at(self, node: int, t: float, started: Callable[[], None], owner: int) -> int | None:
        """Start ``node`` (again) at ``t`` for fault ``owner``; before the nodes start, the
        last call wins. During the run a start merges with one pending (:mod:`.starts`)."""
        if self.starting:
            self.deferred[node] = (t, started, owner)
            return None
        return self.starts.ask(node, t, started, owner)

    def cancel_start(self, node: int) -> int | None:
        return self.starts.cancel(node)

    def never_start(self, nodes: Sequence[int]) -> int:
        """Mark ``nodes`` absent; how many were not already."""
        fresh = [n for n in dict.fromkeys(nodes) if self.nodes[n].status != "absent"]
        for node in fresh:
            self.nodes[node].status = "absent"
        return len(fresh)

    def _hard_deadline(self, node: int, incarnation: int) -> None:
        state = self.nodes[node]
        if state.status is None and state.incarnation == incarnation:
            self.world.kill(node)
            hard = self.sc.timeouts.hard_deadline
            self.finish(node, "hung", f"still running after the {hard:.1f}s hard deadline")

    def finish(self, node: int, status: str, message: str) -> None:
        """Give ``node`` its outcome now (the runner's, on its behalf), unless it has one."""
        state = self.nodes[node]
        if state.status is None:
            state.status = status
            state.finished = self.now()
            state.outcome = Outcome(node, time.monotonic(), status, message=message)

    def _on_message(self, message: Message) -> None:
        node, t = message.node, message.t - self.t0
        state = self.nodes[node]
        if message.part != NODE and not isinstance(message, Event | Outcome):
            raise HarnessError(
                f"node {node}'s part {message.part!r} sent its {type(message).__name__}: the "
                f"runner takes only Events and Outcomes of a node's parts, the rest as part "
                f"{NODE!r}"
            )
        match message:
            case Ready():
                return  # up and at the gate: only the start-up wait cares
            case Outcome(part=part) if part != NODE:  # a job's agent or worker
                state.parts.append(part_outcome(message, t))
            case Started(pid=pid, placement=placement):
                state.began, state.placement, state.parts = t, placement, []
                self._event(NodeEvent(node, t, "started", {"pid": pid, "placement": placement}))
            case Event(name=name, fields=fields, part=part):
                self._event(NodeEvent(node, t, name, fields, part))
            case Outcome(status=status) if state.status is None:
                state.outcome, state.status, state.finished = message, status, t
            case Exit(why=why) if state.status is None and not state.pending_start:
                self.finish(node, "error", why)

    def _event(self, event: NodeEvent) -> None:
        """Record ``event``; the faults waiting for it fire (a job's stages are its parts'
        events: the first part to reach one fires it)."""
        self.nodes[event.node].events.append(event)
        for fire in self.triggers.pop((event.node, event.event), []):
            fire()

    # --- faults ------------------------------------------------------------------------

    def _arm(self, index: int, fault: Fault) -> None:
        """Inject ``fault`` now (start-up), or schedule it at its time or on its event."""
        trigger = fault.when()
        act = partial(self._inject, index, fault)
        if trigger is None:
            act()
        elif trigger.on is not None:
            assert trigger.on_node is not None
            later = partial(self._after, trigger.after, act)
            self.triggers.setdefault((trigger.on_node, trigger.on), []).append(later)
        else:
            self.schedule.at(trigger.at, act)

    def _after(self, delay: float, what: Callable[[], None]) -> None:
        self.schedule.at(self.now() + delay, what)

    def _inject(self, index: int, fault: Fault) -> None:
        ctx = FaultContext(self, index, fault)
        heal = fault.inject(self.world, ctx)
        if ctx.made is None:
            raise HarnessError(
                f"fault[{index}] ({fault.kind}) made no record: its inject() must call "
                "ctx.record(nodes, detail)"
            )
        duration = fault.lasts()
        if heal is not None and duration is not None:
            self._heal_after(ctx.made, duration, heal)

    def _heal_after(self, record: FaultRecord, duration: float, heal: Callable[[], None]) -> None:
        """Heal after ``duration`` -- or at the end of the run, whichever comes first."""
        ticket = next(self._tickets)

        def end() -> None:
            if self.heals.pop(ticket, None) is not None:
                heal()
                record.end = self.now()

        self.heals[ticket] = end
        self.schedule.at(self.now() + duration, end)

    # --- the run ---------------------------------------------------------------------

    def execute(self) -> Report:
        try:
            self._start_up()
        except Exception:
            if not self.stop.is_set():
                raise
            # Ctrl-C while the world started: it gave up waiting (and tore down)
        else:
            self._loop()
        return self._finish_run()

    def _start_up(self) -> None:
        """Build the world, start the first nodes and release them together; the start-up
        reported counts from the world's build (a Ray world's steps take seconds)."""
        began = time.monotonic()
        self.world.build(self.rng.getrandbits(31))
        self.t0 = time.monotonic()
        for index, fault in self.faults:
            self._arm(index, fault)
        now = []
        for node, state in self.nodes.items():
            if state.status == "absent":
                continue
            if node in self.deferred:
                self.starts.pend(node, *self.deferred[node])
            else:
                now.append(node)
        self.starting = False
        self.schedule.run_due(lambda: 0.0)  # faults "at = 0" are there from the start
        self.first = now
        self.start_nodes(now)
        held = await_ready(self.inbox, self.cond, now, self.stop)
        with self.cond:
            self.inbox[:0] = held
        self.t0 = time.monotonic()
        self.released = True
        self.world.release()
        self.startup = self.t0 - began

    def _done(self) -> bool:
        return all(s.status is not None and not s.pending_start for s in self.nodes.values())

    def _loop(self) -> None:
        limit = self.sc.timeouts.hard_deadline * 3 + 30
        while not self._done() and self.now() < limit and not self.stop.is_set():
            with self.cond:
                due = self.schedule.next_due()
                wait = 0.05 if due is None else max(0.0, min(0.05, due - self.now()))
                if not self.inbox:
                    self.cond.wait(wait)
                messages, self.inbox = self.inbox, []
            for message in messages:
                self._on_message(message)
            self.schedule.run_due(self.now)

    def _finish_run(self) -> Report:
        interrupted = self.stop.is_set()  # then end every node now
        self.world.stop_nodes(grace=0.0 if interrupted else 5.0)
        for end in list(self.heals.values()):  # pending heals: release, link up...
            end()
        leaks = self.world.teardown()
        for tally in self.tallies:
            tally()
        self.records += unfired_records(  # their time or event never came: say so
            self.sc, self.faults, self.records, lambda n: self.nodes[n].events, self.now()
        )
        stopped = self.stop.is_set()
        outcomes = [
            node_outcome(n, s, stopped=stopped, output=self.world.output(n), t0=self.t0)
            for n, s in self.nodes.items()
        ]
        faults = sorted(self.records, key=lambda r: r.index)
        for record in faults:
            record.expected_idle = record.index in self.sc.idle_faults
        report = Report(self.sc, self.seed, outcomes, faults, duration=self.now())
        report.startup = self.startup
        report.release_skew = release_skew({n: self.nodes[n].events for n in self.first})
        report.proxy_events = self.world.link_log() or []
        if interrupted:  # stopped mid-run: there is nothing to judge
            report.interrupted = True
            for record in faults:  # one that did nothing (or never fired) had no chance
                if record.acted is not None and not any(record.acted.values()):
                    record.reached = False
            return report
        parts = [part for outcome in outcomes for part in outcome.parts]
        report.violations = check(self.sc, outcomes, leaks=leaks, faults=faults, parts=parts)
        return report


def _layout(scenario: Scenario, tag: str, faults: Sequence[tuple[int, Fault]]) -> Layout:
    """What the world builds: the scenario's nodes and endpoint, and what faults need."""
    layout = Layout(
        tag=tag,
        nodes=scenario.nodes,
        host=scenario.endpoint.host,
        via_links=scenario.endpoint.via_proxy,
        backends=frozenset({scenario.backend, *([JOB_BACKEND] if scenario.job else [])}),
        needs=frozenset(need for _, fault in faults for need in fault.needs),
    )
    for _, fault in faults:
        layout = fault.shape(layout)
    return layout


def run_scenario(
    scenario: Scenario,
    worlds: WorldFactory,
    seed: int | None = None,
    stop: threading.Event | None = None,
) -> Report:
    """Run ``scenario`` once in a world ``worlds`` makes, with ``seed`` (default: the
    scenario's, else a fresh one).

    Setting ``stop`` (from any thread) ends the run at once: every node is killed, the
    world is torn down, and the report is marked ``interrupted`` (not judged).

    Raises:
        UnsupportedError: a fault needs something the world cannot do (nothing started).
        HarnessError: the world could not be built (e.g. the proxy is unreachable).
    """
    chosen = seed if seed is not None else scenario.seed
    if chosen is None:
        chosen = random.SystemRandom().getrandbits(32)
    run = _Run(scenario, chosen, worlds, stop)
    try:
        return run.execute()
    except BaseException:  # e.g. Ctrl-C in pytest: end the nodes at once
        run.world.stop_nodes(grace=0.0)
        run.world.teardown()
        raise
