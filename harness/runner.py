"""Run one scenario: build its network, start its nodes, fire its faults, judge the result.

One seeded ``random.Random`` drives every choice the harness makes (it seeds the proxy's
toxicity rolls and jitter); the seed is in the report. Faults fire at a time offset or a
chosen delay after a node's event; paired verbs undo themselves after ``duration``
(toxic/remove, link down/up, pause/resume, DNS down/up, squatter/release). Every node gets
a hard deadline: past it, the process is killed and reported ``hung``.

Each fault's :class:`~harness.model.FaultRecord` also says what the fault did
(``acted``), counted by whatever carried it out: the proxy's event log for toxics and
links, the store-fault rules, the DNS shims, the squatter, and this module for signals
and starts. Counts that come from elsewhere are added by "tallies" once the run is over.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from harness.checks import check
from harness.cluster import LocalCluster
from harness.errors import HarnessError
from harness.events import link_cuts, toxic_effects
from harness.faults import (
    AbsentFault,
    DnsFault,
    LateStartFault,
    LinkFault,
    ProcessFault,
    SquatterFault,
    StoreOpFault,
    ToxicFault,
)
from harness.model import FaultRecord, NodeEvent, NodeOutcome, Report
from harness.node import Message, NodeSpec
from harness.scenario import Scenario
from harness.store_faults import StoreRule
from harness.topology import Topology
from harness.toxiproxy_client import ToxiproxyClient

__all__ = ["run_scenario"]

_LAUNCHERS = 4  # concurrent process launches


@dataclass(order=True)
class _Action:
    t: float
    seq: int
    what: Callable[[], None] = field(compare=False)


@dataclass
class _NodeState:
    events: list[NodeEvent] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    started: float | None = None
    finished: float | None = None
    status: str | None = None
    pending_start: bool = False
    incarnation: int = 0


class _Run:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        client: ToxiproxyClient,
        stop: threading.Event | None = None,
    ) -> None:
        self.sc = scenario
        self.stop = stop if stop is not None else threading.Event()  # set: Ctrl-C
        self.seed = seed
        self.rng = random.Random(seed)
        self.client = client
        self.tag = f"{scenario.name}-{uuid.UUID(int=self.rng.getrandbits(128)).hex[:8]}"
        self.cond = threading.Condition()
        self.inbox: list[Message] = []
        self.cluster = LocalCluster(
            on_message=self._deliver, backends=frozenset({scenario.backend})
        )
        self.topo = Topology(scenario, client, self.tag, self.cluster.ctx)
        self.nodes = {i: _NodeState() for i in range(scenario.nodes)}
        self.queue: list[_Action] = []
        self.seq = itertools.count()
        self.records: list[FaultRecord] = []
        self.triggers: dict[tuple[int, str], list[Callable[[], None]]] = {}
        self.undos: dict[int, Callable[[], None]] = {}
        self.tallies: list[Callable[[list[dict[str, Any]] | None], None]] = []
        self.squatting: FaultRecord | None = None
        self._link_downs: dict[int, int] = {}  # node -> how many times its link went down
        self.t0 = 0.0

    # --- plumbing ------------------------------------------------------------------

    def _deliver(self, message: Message) -> None:
        with self.cond:
            self.inbox.append(message)
            self.cond.notify()

    def _at(self, t: float, what: Callable[[], None]) -> None:
        heapq.heappush(self.queue, _Action(t, next(self.seq), what))

    def _after(self, delay: float, what: Callable[[], None]) -> None:
        self._at(self.now() + delay, what)

    def now(self) -> float:
        return time.monotonic() - self.t0

    # --- nodes -----------------------------------------------------------------------

    def spec(self, node: int) -> NodeSpec:
        sc = self.sc
        rank, world_size, config = node, sc.nodes, {}
        for override in sc.override:
            if node in override.nodes:
                rank = override.rank if override.rank is not None else rank
                world_size = override.world_size or world_size
                config.update(override.config)
        return NodeSpec(
            node=node,
            backend=sc.backend,
            endpoint=self.topo.endpoint(node),
            run_id=sc.run_id or sc.name,
            rank=rank,
            world_size=world_size,
            join_timeout=sc.timeouts.join,
            config=config,
            dns=self.topo.dns_shim(node),
            start_paused=self._paused_at_start(node),
        )

    def _resume(self, node: int, tries: int = 3) -> None:
        """SIGCONT, and again shortly after while the process still shows as stopped."""
        self.cluster.signal(node, signal.SIGCONT)
        if tries > 1 and self.cluster.stopped(node):
            self._after(0.2, partial(self._resume, node, tries - 1))

    def _paused_at_start(self, node: int) -> bool:
        """A pause triggered by the node's own ``started`` event freezes it before it does
        anything (sending SIGSTOP from here would race the node's first steps)."""
        return any(
            isinstance(f, ProcessFault)
            and f.kind == "pause"
            and f.on == "started"
            and f.on_node == node
            and f.after == 0
            and node in f.nodes
            for f in self.sc.fault
        )

    def start_node(self, node: int) -> None:
        """Start (or restart) one node from the scheduler thread."""
        self.start_nodes([node])

    def start_nodes(self, nodes: list[int]) -> None:
        """Start nodes, a few at a time (a forkserver launch mostly waits on I/O), then
        arm each one's hard deadline."""
        for node in nodes:
            state = self.nodes[node]
            state.pending_start = False
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
            incarnation = state.incarnation
            self._at(
                state.started + self.sc.timeouts.hard_deadline,
                partial(self._hard_deadline, node, incarnation),
            )

    def _launch(self, node: int) -> None:
        sock = self.topo.take_listen_socket() if node == 0 else None
        self.nodes[node].started = self.now()
        held = self.squatting
        if node == 0 and held is not None and held.end is None:
            held.count("starts of node 0 while the port was held")
        try:
            self.cluster.start(self.spec(node), sock)
        finally:
            if sock is not None:
                sock.close()  # node 0 has its own copy; the port dies with node 0

    def _hard_deadline(self, node: int, incarnation: int) -> None:
        state = self.nodes[node]
        if state.status is None and state.incarnation == incarnation:
            self.cluster.kill(node)
            hard = self.sc.timeouts.hard_deadline
            self._finish(node, "hung", message=f"still running after the {hard:.1f}s hard deadline")

    def _finish(self, node: int, status: str, **fields: Any) -> None:
        state = self.nodes[node]
        if state.status is None:
            state.status = status
            state.finished = self.now()
            state.outcome = {"status": status, **fields}

    def _on_message(self, message: Message) -> None:
        kind, node = message[0], message[1]
        t = message[2] - self.t0
        state = self.nodes[node]
        if kind == "event":
            name, fields = message[3], message[4]
            state.events.append(NodeEvent(node, t, name, fields))
            for fire in self.triggers.pop((node, name), []):
                fire()
        elif kind == "outcome" and state.status is None:
            fields = dict(message[3])
            state.outcome, state.status, state.finished = fields, fields["status"], t
        elif kind == "exit" and state.status is None and not state.pending_start:
            code = message[3]["exitcode"]
            self._finish(
                node,
                "error",
                message=f"the node process exited with code {code} without reporting an outcome",
            )

    # --- faults ------------------------------------------------------------------------

    def schedule_faults(self) -> None:
        for index, fault in enumerate(self.sc.fault):
            if isinstance(fault, AbsentFault | SquatterFault | LateStartFault):
                continue
            fire = self._firing(index, fault)
            if fault.on is not None:
                assert fault.on_node is not None
                key = (fault.on_node, fault.on)
                delay = fault.after
                self.triggers.setdefault(key, []).append(partial(self._after, delay, fire))
            else:
                self._at(fault.at or 0.0, fire)

    def _record(self, index: int, kind: str, nodes: list[int], detail: str) -> FaultRecord:
        record = FaultRecord(index, kind, nodes, self.now(), None, detail, acted={})
        self.records.append(record)
        return record

    def _undo_after(
        self, record: FaultRecord, duration: float | None, undo: Callable[[], Any]
    ) -> None:
        """Undo the fault after ``duration`` — or at teardown, whichever comes first."""
        if duration is None:
            return
        key = next(self.seq)

        def end() -> None:
            if self.undos.pop(key, None) is not None:
                undo()
                record.end = self.now()

        self.undos[key] = end
        self._at(self.now() + duration, end)

    def _firing(self, index: int, fault: Any) -> Callable[[], None]:
        def fire() -> None:
            if isinstance(fault, ToxicFault):
                self._toxic(index, fault)
            elif isinstance(fault, LinkFault):
                self._link_down(index, fault)
            elif isinstance(fault, DnsFault):
                self._dns(index, fault)
            elif isinstance(fault, StoreOpFault):
                self._store_op(index, fault)
            elif isinstance(fault, ProcessFault):
                self._process_fault(index, fault)

        return fire

    def _once(self, what: Callable[[], None]) -> Callable[[], None]:
        done = False

        def call() -> None:
            nonlocal done
            if not done:
                done = True
                what()

        return call

    def _toxic(self, index: int, fault: ToxicFault) -> None:
        targets = self.sc.targets(fault.nodes)
        name = f"f{index}-{fault.type}"
        for node in targets:
            self.client.add_toxic(
                self.topo.proxies[node],
                fault.type,
                stream=fault.stream,
                name=name,
                toxicity=fault.toxicity,
                attributes=fault.attributes,
            )
        detail = f"{fault.type} {fault.stream} {fault.attributes}"
        record = self._record(index, "toxic", targets, detail)

        def tally(events: list[dict[str, Any]] | None) -> None:
            if events is None:
                record.not_counted(_NO_EVENT_LOG)
                return
            found = toxic_effects(events, name, fault.type)
            for effect, n in found.effects.items():
                record.count(effect, n)
            if record.idle:
                record.note = _reach(found.applied, found.skipped, fault.type)

        self.tallies.append(tally)

        def remove() -> None:
            for node in targets:
                self.client.remove_toxic(self.topo.proxies[node], name)

        self._undo_after(record, fault.duration, remove)

    def _link_down(self, index: int, fault: LinkFault) -> None:
        targets = self.sc.targets(fault.nodes)
        downs = {node: self._link_downs.get(node, 0) for node in targets}
        for node in targets:
            self._link_downs[node] = downs[node] + 1
            self.client.disable(self.topo.proxies[node])
        record = self._record(index, "link_down", targets, "connections refused")

        def tally(events: list[dict[str, Any]] | None) -> None:
            end = record.end if record.end is not None else math.inf
            refused = sum(
                1
                for node in targets
                for event in self.nodes[node].events
                if event.event == "connect_attempt"
                and record.start <= event.t <= end
                and "refused" in str(event.fields.get("error") or "").lower()
            )
            if events is None:
                record.not_counted(_NO_EVENT_LOG)
            else:
                for node, nth in downs.items():
                    cuts = link_cuts(events, self.topo.proxies[node])
                    record.count("connections cut", cuts[nth] if nth < len(cuts) else 0)
            record.count("connection attempts refused (as the nodes saw them)", refused)

        self.tallies.append(tally)

        def restore() -> None:
            for node in targets:
                self.client.enable(self.topo.proxies[node])

        self._undo_after(record, fault.duration, restore)

    def _dns(self, index: int, fault: DnsFault) -> None:
        self.topo.dns_up.clear()
        host = self.sc.endpoint.host
        record = self._record(
            index, "dns", self.sc.targets(fault.nodes), f"{host} does not resolve"
        )
        base = self.topo.lookups_failed()
        settle = self._once(
            lambda: record.count("lookups failed", self.topo.lookups_failed() - base)
        )
        self.tallies.append(lambda _: settle())

        def heal() -> None:
            self.topo.dns_up.set()
            settle()

        self._undo_after(record, fault.duration, heal)

    def _store_op(self, index: int, fault: StoreOpFault) -> None:
        assert self.topo.store_faults is not None
        targets = self.sc.targets(fault.nodes)
        rule = StoreRule(
            fault.op, fault.keys, fault.action, fault.delay, fault.count, frozenset(targets)
        )
        self.topo.store_faults.add_rule(rule)
        record = self._record(
            index, "store_op", targets, f"{fault.action} {fault.op} on {fault.keys}"
        )

        self.tallies.append(partial(_tally, record, rule))

    def _process_fault(self, index: int, fault: ProcessFault) -> None:
        targets = self.sc.targets(fault.nodes)
        record = self._record(index, fault.kind, targets, "")
        for node in targets:
            if fault.kind == "kill":
                if self.cluster.kill(node):
                    record.count("SIGKILLs delivered")
                    self._finish(node, "killed", message="killed by the harness (SIGKILL)")
                record.end = record.start
            elif fault.kind == "pause":
                if fault.on == "started" and self._paused_at_start(node):
                    # (a node paused at start stops itself; a SIGSTOP from here could land
                    # before its own and be undone first, leaving it stopped for good)
                    record.count("nodes paused (SIGSTOP)")
                elif self.cluster.signal(node, signal.SIGSTOP):
                    record.count("nodes paused (SIGSTOP)")
                self._undo_after(record, fault.duration, partial(self._resume, node))
            else:  # restart: kill now, start a new incarnation after `duration` (or at once)
                if self.cluster.kill(node):
                    record.count("SIGKILLs delivered")
                self.nodes[node].pending_start = True
                later = partial(self._restart, record, node)
                self._at(self.now() + (fault.duration or 0.0), later)
                record.end = self.now() + (fault.duration or 0.0)

    def _restart(self, record: FaultRecord, node: int) -> None:
        self.start_node(node)
        record.count("nodes restarted")

    def _static_faults(self) -> tuple[set[int], dict[int, tuple[float, FaultRecord]]]:
        """Record the faults that hold from the start: absent nodes, late starts, squatters.

        Returns:
            The absent nodes, and each late node's delay and record.
        """
        sc = self.sc
        absent: set[int] = set()
        late: dict[int, tuple[float, FaultRecord]] = {}
        for index, fault in enumerate(sc.fault):
            if isinstance(fault, AbsentFault):
                record = self._record(index, "absent", fault.nodes, "never started")
                record.start = 0.0
                record.count("nodes never started", len(set(fault.nodes) - absent))
                absent |= set(fault.nodes)
            elif isinstance(fault, LateStartFault):
                detail = f"start delayed by {fault.delay:g} s"
                record = self._record(index, "late_start", fault.nodes, detail)
                record.start, record.end = 0.0, fault.delay
                late.update((n, (fault.delay, record)) for n in fault.nodes)
            elif isinstance(fault, SquatterFault):
                record = self._record(index, "squatter", [0], fault.mode)
                self.squatting = record
                squatter = self.topo.squatter
                assert squatter is not None
                self.tallies.append(partial(_tally, record, squatter))
                if fault.duration is not None:
                    self._undo_after(record, fault.duration, squatter.release)
        return absent, late

    def _late_start(self, record: FaultRecord, node: int) -> None:
        self.start_node(node)
        record.count("nodes started late")

    # --- the run ---------------------------------------------------------------------

    def execute(self) -> Report:
        sc = self.sc
        self.client_seed()
        self.topo.build()
        self.t0 = time.monotonic()
        absent, late = self._static_faults()
        self.schedule_faults()
        now = []
        for node in range(sc.nodes):
            if node in absent:
                self.nodes[node].status = "absent"
            elif node in late:
                delay, record = late[node]
                self.nodes[node].pending_start = True
                self._at(delay, partial(self._late_start, record, node))
            else:
                now.append(node)
        while self.queue and self.queue[0].t <= 0:  # faults "at = 0" are there from the start
            heapq.heappop(self.queue).what()
        self.start_nodes(now)
        self._loop()
        return self._finish_run()

    def client_seed(self) -> None:
        with contextlib.suppress(Exception):  # a real Toxiproxy has no seed to set
            self.client.set_seed(self.rng.getrandbits(31))

    def _done(self) -> bool:
        return all(s.status is not None and not s.pending_start for s in self.nodes.values())

    def _loop(self) -> None:
        limit = self.sc.timeouts.hard_deadline * 3 + 30
        while not self._done() and self.now() < limit and not self.stop.is_set():
            with self.cond:
                wait = 0.05 if not self.queue else max(0.0, min(0.05, self.queue[0].t - self.now()))
                if not self.inbox:
                    self.cond.wait(wait)
                messages, self.inbox = self.inbox, []
            for message in messages:
                self._on_message(message)
            while self.queue and self.queue[0].t <= self.now():
                heapq.heappop(self.queue).what()

    def _finish_run(self) -> Report:
        interrupted = self.stop.is_set()  # then kill every node now, by PID
        leftovers = self.cluster.close(grace=0.0 if interrupted else 5.0)
        for end in list(self.undos.values()):  # pending "undo" halves: release, enable...
            end()
        problems = self.topo.teardown()
        events = self._proxy_events()
        for tally in self.tallies:
            tally(events)
        outcomes = [self._outcome(n, s) for n, s in self.nodes.items()]
        faults = sorted(self.records, key=lambda r: r.index)
        report = Report(self.sc, self.seed, outcomes, faults, duration=self.now())
        report.proxy_events = events or []
        if interrupted:  # stopped mid-run: there is nothing to judge
            report.interrupted = True
            return report
        report.violations = check(
            self.sc,
            outcomes,
            leftover_pids=leftovers,
            ports=self.topo.ports(),
            teardown_problems=problems,
        )
        return report

    def _proxy_events(self) -> list[dict[str, Any]] | None:
        """The event log of every link a toxic or link fault targeted (None: the proxy
        keeps no log, as a real Toxiproxy does not)."""
        names = sorted(
            {self.topo.proxies[n] for r in self.records if r.kind in _LINK_KINDS for n in r.nodes}
        )
        events: list[dict[str, Any]] = []
        try:
            for name in names:
                events += self.client.events(proxy=name)
        except HarnessError:
            return None
        return sorted(events, key=lambda e: int(e["seq"]))

    def _outcome(self, node: int, state: _NodeState) -> NodeOutcome:
        fields = state.outcome or {}
        return NodeOutcome(
            node=node,
            status=state.status or ("interrupted" if self.stop.is_set() else "hung"),
            rank=fields.get("rank"),
            world_size=fields.get("world_size"),
            run_id=fields.get("run_id"),
            error_class=fields.get("error_class"),
            message=fields.get("message"),
            started=state.started,
            finished=state.finished,
            pid=fields.get("pid"),
            events=state.events,
            shared_store_ok=fields.get("shared_store_ok"),
            seen_ranks=fields.get("seen_ranks"),
            output=self.cluster.outputs.get(node),
            maxrss_kib=fields.get("maxrss_kib"),
        )


_LINK_KINDS = frozenset({"toxic", "link_down"})
_NO_EVENT_LOG = "not counted: the proxy keeps no event log (a real Toxiproxy has none)"


class _Carrier(Protocol):
    """Whatever carries a fault out and counts what it did (a store rule, a squatter)."""

    @property
    def acted(self) -> dict[str, int]: ...


def _tally(record: FaultRecord, carrier: _Carrier, _events: object) -> None:
    for effect, n in carrier.acted.items():
        record.count(effect, n)


def _reach(applied: int, skipped: int, toxic_type: str) -> str:
    """Why a toxic that never acted did nothing, as far as the proxy's log tells."""
    if toxic_type == "noop":
        return "a noop toxic never acts"
    if applied == 0 and skipped == 0:
        return "no connection was open on the link while it was in place"
    if applied == 0:
        return f"its toxicity roll left out all {skipped} connection(s) it met"
    what = "data reached it" if toxic_type != "slow_close" else "a connection closed"
    s = "" if applied == 1 else "s"
    return f"in place on {applied} connection{s}, but no {what} there"


def run_scenario(
    scenario: Scenario,
    client: ToxiproxyClient,
    seed: int | None = None,
    stop: threading.Event | None = None,
) -> Report:
    """Run ``scenario`` once with ``seed`` (default: the scenario's, else a fresh one).

    Setting ``stop`` (from any thread) ends the run at once: every node is killed by PID,
    the proxies are removed, and the report is marked ``interrupted`` (not judged).
    """
    chosen = seed if seed is not None else scenario.seed
    if chosen is None:
        chosen = random.SystemRandom().getrandbits(32)
    run = _Run(scenario, chosen, client, stop)
    try:
        return run.execute()
    except BaseException:  # e.g. Ctrl-C in pytest: kill the nodes at once, by PID
        run.cluster.close(grace=0.0)
        run.topo.teardown()
        raise
