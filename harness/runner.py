"""Run one scenario: build its network, start its nodes, fire its faults, judge the result.

One seeded ``random.Random`` drives every choice the harness makes (it seeds the proxy's
toxicity rolls and jitter); the seed is in the report. Faults fire at a time offset or a
chosen delay after a node's event; paired verbs undo themselves after ``duration``
(toxic/remove, link down/up, pause/resume, DNS down/up, squatter/release). Every node gets
a hard deadline: past it, the process is killed and reported ``hung``.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from harness.checks import check
from harness.cluster import LocalCluster
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
    def __init__(self, scenario: Scenario, seed: int, client: ToxiproxyClient) -> None:
        self.sc = scenario
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
            dns=self.topo.dns_shim(),
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
        record = FaultRecord(index, kind, nodes, self.now(), None, detail)
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
        sc = self.sc

        def fire() -> None:
            if isinstance(fault, ToxicFault):
                self._toxic(index, fault)
            elif isinstance(fault, LinkFault):
                self._link_down(index, fault)
            elif isinstance(fault, DnsFault):
                self.topo.dns_up.clear()
                record = self._record(
                    index, "dns", sc.targets(fault.nodes), f"{sc.endpoint.host} does not resolve"
                )
                self._undo_after(record, fault.duration, self.topo.dns_up.set)
            elif isinstance(fault, StoreOpFault):
                assert self.topo.store_faults is not None
                self.topo.store_faults.add_rule(
                    StoreRule(
                        fault.op,
                        fault.keys,
                        fault.action,
                        fault.delay,
                        fault.count,
                        frozenset(sc.targets(fault.nodes)),
                    )
                )
                self._record(
                    index,
                    "store_op",
                    sc.targets(fault.nodes),
                    f"{fault.action} {fault.op} on {fault.keys}",
                )
            elif isinstance(fault, ProcessFault):
                self._process_fault(index, fault)

        return fire

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

        def remove() -> None:
            for node in targets:
                self.client.remove_toxic(self.topo.proxies[node], name)

        self._undo_after(record, fault.duration, remove)

    def _link_down(self, index: int, fault: LinkFault) -> None:
        targets = self.sc.targets(fault.nodes)
        for node in targets:
            self.client.disable(self.topo.proxies[node])
        record = self._record(index, "link_down", targets, "connections refused")

        def restore() -> None:
            for node in targets:
                self.client.enable(self.topo.proxies[node])

        self._undo_after(record, fault.duration, restore)

    def _process_fault(self, index: int, fault: ProcessFault) -> None:
        targets = self.sc.targets(fault.nodes)
        record = self._record(index, fault.kind, targets, "")
        for node in targets:
            if fault.kind == "kill":
                if self.cluster.kill(node):
                    self._finish(node, "killed", message="killed by the harness (SIGKILL)")
                record.end = record.start
            elif fault.kind == "pause":
                if not (fault.on == "started" and self._paused_at_start(node)):
                    # (a node paused at start stops itself; a SIGSTOP from here could land
                    # before its own and be undone first, leaving it stopped for good)
                    self.cluster.signal(node, signal.SIGSTOP)
                self._undo_after(record, fault.duration, partial(self._resume, node))
            else:  # restart: kill now, start a new incarnation after `duration` (or at once)
                self.cluster.kill(node)
                self.nodes[node].pending_start = True
                self._at(self.now() + (fault.duration or 0.0), partial(self.start_node, node))
                record.end = self.now() + (fault.duration or 0.0)

    # --- the run ---------------------------------------------------------------------

    def execute(self) -> Report:
        sc = self.sc
        self.client_seed()
        self.topo.build()
        self.t0 = time.monotonic()
        absent = {n for f in sc.fault if isinstance(f, AbsentFault) for n in f.nodes}
        late = {n: f.delay for f in sc.fault if isinstance(f, LateStartFault) for n in f.nodes}
        for fault in sc.fault:
            if isinstance(fault, SquatterFault):
                record = self._record(sc.fault.index(fault), "squatter", [0], fault.mode)
                if fault.duration is not None:
                    squatter = self.topo.squatter
                    assert squatter is not None
                    self._undo_after(record, fault.duration, squatter.release)
        self.schedule_faults()
        now = []
        for node in range(sc.nodes):
            if node in absent:
                self.nodes[node].status = "absent"
            elif node in late:
                self.nodes[node].pending_start = True
                self._at(late[node], partial(self.start_node, node))
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
        while not self._done() and self.now() < limit:
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
        leftovers = self.cluster.close()
        for end in list(self.undos.values()):  # pending "undo" halves: release, enable...
            end()
        problems = self.topo.teardown()
        outcomes = [self._outcome(n, s) for n, s in self.nodes.items()]
        report = Report(self.sc, self.seed, outcomes, self.records, duration=self.now())
        report.violations = check(
            self.sc,
            outcomes,
            leftover_pids=leftovers,
            ports=self.topo.ports(),
            teardown_problems=problems,
        )
        return report

    def _outcome(self, node: int, state: _NodeState) -> NodeOutcome:
        fields = state.outcome or {}
        return NodeOutcome(
            node=node,
            status=state.status or "hung",
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


def run_scenario(scenario: Scenario, client: ToxiproxyClient, seed: int | None = None) -> Report:
    """Run ``scenario`` once with ``seed`` (default: the scenario's, else a fresh one)."""
    chosen = seed if seed is not None else scenario.seed
    if chosen is None:
        chosen = random.SystemRandom().getrandbits(32)
    run = _Run(scenario, chosen, client)
    try:
        return run.execute()
    except BaseException:
        run.cluster.close()
        run.topo.teardown()
        raise
