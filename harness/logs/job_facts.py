"""A torchrun job's log: which lines are the job's own (its workers'), and what they say.

A job node's log holds two things: the agent's rendezvous (what :mod:`~harness.logs.facts`
and :mod:`~harness.logs.plan` read, as for any node) and, once that rendezvous completed,
the job's own lines: its workers' errors (a store key waited for in vain, gloo's full-mesh
connect, ``EADDRINUSE``, a crash), the ``ChildFailedError`` box's root cause, restarts of the
worker group and the harness's stages (``workers_started``, ``pg_ready``, ...).
:func:`split` separates the two; :func:`job_facts` reads the second.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.logs.lines import Line
from harness.logs.signals import Observation
from harness.logs.streams import Stream
from harness.world.process.jobs.spec import failure_class

__all__ = ["JobFacts", "WorkerError", "is_job", "job_facts", "rank_keys", "split"]

Read = list[tuple[Line, list[Observation]]]

#: Lines only a job's log has: the agent's worker group, its workers, the harness's stages.
_JOB_TEXT = re.compile(
    r"ChildFailedError|local_rank:|init_process_group|Gloo connectFullMesh|/default_pg/"
    r"|store based barrier|Worker group FAILED|workers failed|Starting worker group"
    r"|endpoint is absent in RendezvousParameters|\btorch_imported\b"
)
#: What a worker's line says that is the job's, once its agent's rendezvous completed.
_JOB_KINDS = frozenset({"cause", "error", "missing", "barrier", "died"})
#: An error of the agent itself (the node's outcome), even after its rendezvous.
_AGENT_ERROR = re.compile(r"ChildFailedError|Rendezvous\w*Error")
_AGENT_SIGNAL = re.compile(r"death signal|killed by the harness")
_PG_TIMEOUT = re.compile(
    r"(?:wait timeout after|timed out after|Timed out after) (?P<ms>\d+)\s*ms"
    r"|store based barrier.*timeout=(?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d)"
)
_LOCAL_RANK = re.compile(r"local_rank:? \(?(?P<local>\d+)")
#: gloo's key of a rank (``/default_pg/0//cpu//0/3``: rank 3's address)
_RANK_KEY = re.compile(
    r"default_pg/\d+//\w+//\d+/(?P<rank>\d+)\b|default_pg/\d+/rank_(?P<old>\d+)\b"
)
_LOOPBACK = re.compile(r"\b(?:127\.0\.0\.1|localhost|::1)\b")
_MAX_RESTARTS = re.compile(r"max_restarts\s*[=:]\s*(?P<n>\d+)")


@dataclass(frozen=True)
class WorkerError:
    """A worker's error on a node, after its agent's rendezvous."""

    node: int
    line: Line
    cls: str
    message: str
    outcome: str
    #: The local rank the log names for it, if it does.
    local: int | None = None


@dataclass
class JobFacts:
    """What a job's own lines say, per node where it matters."""

    #: Workers per node, and the line that says so (None: not stated, one is assumed).
    nproc: int | None = None
    nproc_line: Line | None = None
    max_restarts: int | None = None
    #: The process group's timeout (seconds) the workers' errors state, and that line.
    pg_timeout: float | None = None
    pg_line: Line | None = None
    errors: list[WorkerError] = field(default_factory=list)
    #: Each node's stages in order (the harness's node logs), and its restarts of the group.
    stages: dict[int, list[Observation]] = field(default_factory=dict)
    restarts: dict[int, list[Observation]] = field(default_factory=dict)
    #: The lines that say the agents ran without an endpoint, or lost c10d's store.
    no_endpoint: Line | None = None
    store_lost: Line | None = None
    #: A store-based barrier's count (world_size, worker_count) and its line.
    barrier: tuple[int, int, Line] | None = None


def is_job(read: Read) -> bool:
    """Whether the log is a torchrun job's beyond its rendezvous: the agent's worker group,
    its workers' lines, or the harness's stages of a job node."""
    return any(
        any(o.kind == "stage" for o in obs)
        or line.local_rank is not None
        or _JOB_TEXT.search(line.text) is not None
        for line, obs in read
    )


def _agent_level(o: Observation) -> bool:
    if o.line.rank is not None or o.line.local_rank is not None:
        return False  # torchrun's tee of a worker (``[default0]:``), a worker's ``[rank3]:``
    if o.kind not in _JOB_KINDS:
        return True
    if o.kind == "error":
        return _AGENT_ERROR.search(str(o.data.get("cls"))) is not None
    return o.kind == "died" and _AGENT_SIGNAL.search(o.line.text) is not None


def split(read: Read, sources: Sequence[str]) -> tuple[Read, Read]:
    """The agents' lines (what the rendezvous rules read) and the job's (what its workers
    said once their agent's rendezvous completed). With one file per node, a file is one
    node: its agent's pid does not split it (its workers' lines carry none)."""
    agents: Read = []
    job: Read = []
    done: set[str] = set()
    for read_line, read_observations in read:
        line, observations = read_line, read_observations
        if len(sources) > 1 and line.pid is not None:
            line = dataclasses.replace(line, pid=None)
            observations = [dataclasses.replace(o, line=line) for o in observations]
        if line.rank is not None or line.local_rank is not None:  # a worker's own line
            done.add(line.source)
        if line.source in done:
            mine = [o for o in observations if _agent_level(o)]
            theirs = [o for o in observations if not _agent_level(o)]
            if theirs:
                job.append((line, theirs))
            if mine:
                agents.append((line, mine))
        else:
            agents.append((line, observations))
        if any(o.kind in ("complete", "stage", "restart") for o in observations):
            done.add(line.source)
    return agents, job


def _node_of(streams: Sequence[Stream]) -> dict[str, int]:
    nodes: dict[str, int] = {}
    for stream in streams:
        for line in stream.lines:
            if stream.node is not None:
                nodes.setdefault(line.source, stream.node)
    return nodes


def job_facts(streams: Sequence[Stream], job: Read, nproc: int | None) -> JobFacts:
    """The job's facts from its lines (``job``, from :func:`split`) and the agents' streams
    (their stages); ``nproc``: the workers per node the launch configs state, if they do."""
    facts = JobFacts(nproc=nproc)
    node_of = _node_of(streams)
    locals_seen: list[tuple[int, Line]] = []
    for stream in streams:
        node = stream.node if stream.node is not None else 0
        for o in stream.observations:
            if o.kind == "stage":
                facts.stages.setdefault(node, []).append(o)
                pids = o.data.get("pids")
                if o.data["stage"] == "workers_started" and isinstance(pids, list) and pids:
                    locals_seen.append((len(pids) - 1, o.line))
            if o.kind == "restart":
                facts.restarts.setdefault(node, []).append(o)
            if "endpoint is absent" in o.line.text and facts.no_endpoint is None:
                facts.no_endpoint = o.line
            lost = "connection to the C10d store has failed" in o.line.text
            if lost and _LOOPBACK.search(o.line.text):  # a peer's store dialed on loopback
                facts.store_lost = facts.store_lost or o.line
            if m := _MAX_RESTARTS.search(o.line.text):
                facts.max_restarts = int(m["n"])
    for line, observations in job:
        node = node_of.get(line.source, 0)
        local = line.local_rank
        if local is None and (m := _LOCAL_RANK.search(line.text)):
            local = int(m["local"])
        if local is not None:
            locals_seen.append((local, line))
        if facts.pg_timeout is None and (m := _PG_TIMEOUT.search(line.text)):
            if m["ms"]:
                facts.pg_timeout = int(m["ms"]) / 1000
            else:
                facts.pg_timeout = float(int(m["h"]) * 3600 + int(m["m"]) * 60 + int(m["s"]))
            facts.pg_line = line
        for o in observations:
            if o.kind == "error" and o.data.get("cls"):
                cls, message = str(o.data["cls"]), str(o.data.get("message") or "")
                outcome = failure_class(message, cls)
                facts.errors.append(WorkerError(node, line, cls, message, outcome, local))
            if o.kind == "barrier" and facts.barrier is None:
                facts.barrier = (o.data["world_size"], o.data["worker_count"], line)
            if o.kind == "died":
                facts.errors.append(
                    WorkerError(node, line, "", line.text, "error", o.data.get("local", local))
                )
    if facts.nproc is None and locals_seen:
        top, where = max(locals_seen, key=lambda kv: kv[0])
        facts.nproc, facts.nproc_line = top + 1, where
    return facts


def rank_keys(facts: JobFacts) -> list[tuple[int, Line]]:
    """The ranks whose gloo key the workers waited for in vain, with the line naming each."""
    found: dict[int, Line] = {}
    for error in facts.errors:
        for m in _RANK_KEY.finditer(error.message):
            found.setdefault(int(m["rank"] or m["old"]), error.line)
    return sorted(found.items(), key=lambda kv: kv[0])
