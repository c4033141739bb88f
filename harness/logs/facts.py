"""From streams to facts: the job's shape, the timeouts, and how each node ended.

Everything here is read from the log or, where the log is silent, assumed with a reason;
each :class:`Fact` keeps the lines it came from, each assumption is a sentence, so the
console and ``--explain`` can say which is which.

Timeouts the log does not state are torch's defaults (torch-logs.md): 900 s to join
under torchrun (its rendezvous `timeout`, which the static backend reads), 600 s for c10d
(its `join_timeout`, which torchrun leaves unset), 60 s to connect to the c10d store,
300 s for TCPStore and static rendezvous operations, 30 min for the process group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.logs.causes import CAUSES
from harness.logs.lines import Line
from harness.logs.signals import Observation
from harness.logs.streams import Stream

__all__ = ["DEFAULT_TIMEOUTS", "Fact", "Facts", "NodeFacts", "gather"]

#: torch's defaults, seconds: what a log that states no timeout ran with.
DEFAULT_TIMEOUTS = {
    "rdzv_join": 600.0,
    # torchrun sets rdzv_configs' `timeout` to 900 s, which the static backend reads as its
    # join timeout; c10d reads `join_timeout` instead, whose default is 600 s.
    "join": 900.0,
    "c10d_join": 600.0,
    "store_connect": 60.0,
    "store": 300.0,
    "process_group": 1800.0,
}

_KEY_WAIT = dict(CAUSES)["key_wait"]
#: What a node's ``started`` event says of its placement in the netns world.
_NAMESPACED = "network namespace of its own"

#: Events a fault can be triggered on (docs/scenarios.md "Triggers").
#: A job node's stages are triggers too (docs/jobs.md "Parts and stages").
TRIGGERS = (
    *("started", "connect_attempt", "connected", "joined", "complete", "failed"),
    *("rendezvous_done", "workers_started", "pg_ready", "collective_done"),
)


@dataclass(frozen=True)
class Fact:
    """One thing inferred, with the lines it came from."""

    what: str
    lines: tuple[Line, ...] = ()


@dataclass
class NodeFacts:
    """One node as the log shows it."""

    node: int
    stream: Stream | None
    outcome: str | None = None
    outcome_line: Line | None = None
    message: str = ""
    first: float | None = None
    causes: list[Observation] = field(default_factory=list)
    died: Observation | None = None
    #: The last event a fault can be triggered on, and its time.
    last_trigger: tuple[str, float | None] | None = None
    last_time: float | None = None
    connected_at: float | None = None
    joined: bool = False
    world: int | None = None
    #: Workers' errors after the rendezvous completed (job-level, not reproduced).
    job_errors: list[Observation] = field(default_factory=list)

    @property
    def seen(self) -> bool:
        return self.stream is not None and bool(self.stream.lines)

    @property
    def observations(self) -> list[Observation]:
        """What the node's lines said (none when it is not in the log)."""
        return self.stream.observations if self.stream is not None else []

    @property
    def begin(self) -> float | None:
        """When the node began its rendezvous: its first line past a bare ``started``."""
        if self.stream is None:
            return None
        times = [
            line.when
            for line in self.stream.lines
            if line.when is not None
            and line.event != "started"
            and not line.text.startswith("started")
        ]
        return min(times) if times else self.first


@dataclass
class Facts:
    """What the logs say, and what had to be assumed."""

    nodes: list[NodeFacts]
    launcher: str
    backend: str | None
    workers_per_node: int | None
    join_timeout: float
    #: Whether a line stated the join timeout (else it is a default, assumed).
    join_stated: bool
    missing: set[int]
    endpoint_host: str | None
    max_restarts: int | None
    restarts: list[Observation]
    barriers: list[Observation]
    facts: list[Fact]
    assumptions: list[str]
    formats: Counter[str]
    unknown: int
    #: The line saying the nodes ran in network namespaces of their own (the netns world:
    #: the network's faults were the kernel's), if one does.
    kernel_network: Line | None = None

    def node(self, node: int) -> NodeFacts:
        return self.nodes[node]

    @property
    def world_size(self) -> int:
        return len(self.nodes)


_TORCHRUN_LOGGERS = (
    "torch.distributed.elastic",
    "torch/distributed/elastic",
    "torch/distributed/run.py",
    "torch.distributed.run",
)


def _job_level(line: Line) -> bool:
    """A worker's line (``[rankN]:``, torchrun's ``[roleN]:``) that is neither the store
    barrier's count nor a key waited for in vain (those two are replayed as the
    rendezvous' missing ranks and a rank holding its key back)."""
    worker = line.rank is not None or line.local_rank is not None
    store_level = "store based barrier" in line.text or _KEY_WAIT.search(line.text) is not None
    return worker and not store_level


def _by_signal(died: Observation) -> bool:
    """A death by a signal (a negative exit code is torch's way of naming one); an exit
    code of 1 is an error the node raised, whose class the log states elsewhere."""
    code = died.data.get("exitcode")
    return bool(died.data.get("signal")) or (isinstance(code, int) and code < 0)


def _first(observations: Sequence[Observation], kind: str) -> Observation | None:
    return next((o for o in observations if o.kind == kind), None)


def _node_facts(node: int, stream: Stream | None) -> NodeFacts:
    facts = NodeFacts(node, stream)
    if stream is None:
        return facts
    times = [line.when for line in stream.lines if line.when is not None]
    facts.first = min(times) if times else None
    facts.last_time = max(times) if times else None
    # once the agent's rendezvous completed (workers started, or restarted), a worker's own
    # errors are the job's: not the rendezvous' (a store barrier's count still is)
    done = any(o.kind in ("complete", "restart") for o in stream.observations)
    observations = []
    for o in stream.observations:
        if done and o.kind in ("cause", "error") and _job_level(o.line):
            facts.job_errors.append(o)
        else:
            observations.append(o)
    for o in observations:
        if o.kind == "cause":
            facts.causes.append(o)
        elif o.kind == "died" and facts.died is None and _by_signal(o):
            facts.died = o
        elif o.kind == "world":
            facts.world = o.data["size"]
        elif o.kind == "joined":
            facts.joined = True
        elif o.kind == "connected" and facts.connected_at is None:
            facts.connected_at = o.line.when
        event = o.data["stage"] if o.kind == "stage" else o.kind
        if event in TRIGGERS and (facts.last_trigger or ("",))[0] != event:
            # a trigger fires on the event's first time: an event repeated counts from there
            facts.last_trigger = (event, o.line.when)
    reported = [o for o in observations if o.kind == "outcome"]
    errors = [o for o in observations if o.kind == "error"]
    complete = _first(observations, "complete") or _first(observations, "restart")
    if reported:
        last = reported[-1]
        facts.outcome, facts.outcome_line = last.data["status"], last.line
        facts.message = last.data.get("message") or ""
    elif facts.died is not None:
        facts.outcome, facts.outcome_line = "killed", facts.died.line
    elif errors:
        # the rendezvous' own error, not a retry's cause on the way
        best = next((e for e in reversed(errors) if "Rendezvous" in str(e.data["cls"])), errors[-1])
        facts.outcome, facts.outcome_line = best.data["outcome"], best.line
        facts.message = best.data.get("message") or ""
    elif complete is not None:
        ended = _first(stream.observations, "shutdown")
        rdzv = any(o.kind == "joined" and "run_id" in o.data for o in stream.observations)
        if ended is not None or not rdzv:  # rdzv's handler says shutdown at the end
            facts.outcome, facts.outcome_line = "ok", (ended or complete).line
    return facts


def gather(
    streams: Sequence[Stream], assumptions: list[str], formats: Counter[str], unknown: int
) -> Facts:
    """The facts of the grouped streams."""
    facts: list[Fact] = []
    every = [o for s in streams for o in s.observations]
    by_node = {s.node: s for s in streams if s.node is not None}
    launch = [o for o in every if o.kind == "launch"]
    config: dict[str, str] = {}
    for o in launch:
        config.update(o.data)
    torchrun = bool(launch) or any(
        any(t in (line.logger or "") for t in _TORCHRUN_LOGGERS) or line.local_rank is not None
        for s in streams
        for line in s.lines
    )
    backend = config.get("rdzv_backend")
    if any(
        line.fmt.startswith("harness") or (line.logger or "").startswith("rdzv")
        for s in streams
        for line in s.lines
    ):
        backend = backend or "rdzv"
    nproc_text = config.get("nproc_per_node", "").rstrip(".")
    nproc = int(nproc_text) if nproc_text.isdigit() else None
    if launch and torchrun:
        facts.append(
            Fact(
                f"torchrun launched the job (rdzv_backend {backend}, nproc_per_node {nproc})",
                (launch[0].line,),
            )
        )
    sizes = [o for o in every if o.kind == "world"]
    size_counts = Counter(o.data["size"] for o in sizes)
    stated = max(size_counts, key=lambda k: (size_counts[k], -k)) if size_counts else None
    max_nodes = int(config["max_nodes"]) if config.get("max_nodes", "").isdigit() else None
    barriers = [o for o in every if o.kind == "barrier"]
    size = stated or max_nodes
    if size is None and barriers:
        size = max(1, barriers[0].data["world_size"] // (nproc or 1))
        if nproc is None:
            assumptions.append("no line states the workers per node: one, as in a plain rendezvous")
    if size is not None:
        said = [o for o in sizes if o.data["size"] == size]
        said += [o for o in launch if o.data.get("max_nodes") == str(size)]
        said += barriers[:1]
        facts.append(Fact(f"the world has {size} nodes", (said[0].line,) if said else ()))
    top = max(by_node, default=0)
    if size is None or top >= size:
        size = max(top + 1, len(by_node), 1)
        assumptions.append(
            f"no line states the world size: {size} node(s), as many as the log shows"
        )
    missing: set[int] = set()
    for o in every:
        if o.kind == "missing":
            missing.update(r for r in o.data["ranks"] if r < size)
    timeouts = [o for o in every if o.kind == "join_timeout"]
    if backend == "c10d":  # c10d reads join_timeout, never rdzv_configs' 'timeout'
        timeouts = [o for o in timeouts if not o.data.get("rdzv_timeout")]
    if timeouts:
        join = max(Counter(o.data["seconds"] for o in timeouts).items(), key=lambda kv: kv[1])[0]
        facts.append(Fact(f"the join timeout was {join:g} s", (timeouts[0].line,)))
    else:
        if backend == "rdzv":
            join, why = DEFAULT_TIMEOUTS["rdzv_join"], "rdzv's default join timeout"
        elif torchrun and backend == "c10d":
            join, why = DEFAULT_TIMEOUTS["c10d_join"], "torch's default: c10d's join_timeout"
        elif torchrun:
            join, why = DEFAULT_TIMEOUTS["join"], "torchrun's default rendezvous timeout"
        else:
            join, why = DEFAULT_TIMEOUTS["store"], "torch's default: TCPStore's timeout"
        assumptions.append(f"no line states a timeout: {join:g} s ({why})")
    hosts = [o.data.get("host") for o in every if o.kind == "cause" and o.data.get("host")]
    named = next((h for h in hosts if h and any(c.isalpha() for c in h) and h != "localhost"), None)
    restarts = [o for o in every if o.kind == "restart"]
    max_restarts = int(config["max_restarts"]) if config.get("max_restarts", "").isdigit() else None
    nodes = [_node_facts(i, by_node.get(i)) for i in range(size)]
    kernel = next(
        (o.line for o in every if o.kind == "started" and _NAMESPACED in str(o.data)), None
    )
    if kernel is not None:
        facts.append(
            Fact("the nodes ran in network namespaces of their own (the netns world)", (kernel,))
        )
    return Facts(
        nodes=nodes,
        launcher="torchrun" if torchrun else "rendezvous",
        backend=backend,
        workers_per_node=nproc,
        join_timeout=join,
        join_stated=bool(timeouts),
        missing=missing,
        endpoint_host=named,
        max_restarts=max_restarts,
        restarts=restarts,
        barriers=barriers,
        facts=facts,
        assumptions=assumptions,
        formats=formats,
        unknown=unknown,
        kernel_network=kernel,
    )
