"""A torchrun job's log -> the job scenario's parts: ``[job]``, faults on one part, and
``[[expect.parts]]`` (docs/jobs.md), on top of the rendezvous plan (:mod:`~harness.logs.plan`).

The rules, in order, each quoting its lines:

1. Workers per node (the launch configs, the harness's ``workers_started``, the highest
   ``local_rank``; else one, assumed), ``max_restarts`` (the launch configs, else the
   restarts seen), the process group's timeout (``wait timeout after 4000ms``, the store
   barrier's ``timeout=``), scaled with the rendezvous' times.
2. A gloo key waited for in vain (``keys: /default_pg/0//cpu//0/R``), or a store-based
   barrier short of workers: rank R's worker never joined -> ``pause`` of ``worker L`` on
   node N (R = N x nproc + L) from its start, past the group's timeout.
3. ``EADDRINUSE`` in a worker -> the workers run a launcher nested on MASTER_PORT (J05's).
4. A worker's error on a node whose agent then restarted its group -> ``kill`` of that
   worker once its process group was up (the harness's ``pg_ready``), ``max_restarts``.
5. ``Gloo connectFullMesh failed`` -> every host filters every port but the store's (F34,
   the netns world).
6. ``The connection to the C10d store has failed`` -> the agents advertise a host name that
   resolves to loopback (``local_addr = "localhost"``, F21, the netns world; c10d only).
7. ``endpoint is absent in RendezvousParameters`` -> ``endpoint = false`` (F24).

Each failed node's workers are expected to end as its log shows them (a worker's error
classed as the harness classes it: :func:`~harness.world.process.jobs.spec.failure_class`),
or stopped by their agent; while a peer node died, also ``connection_error`` or ``timeout``
(gloo sees the pair close, or a send waits out the group's timeout: a race).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.logs.causes import CAUSES
from harness.logs.facts import Facts
from harness.logs.job_facts import JobFacts, WorkerError, rank_keys
from harness.logs.lines import Line
from harness.logs.planned import ANY, Plan, PlannedFault

__all__ = ["job_plan"]

_IN_USE = dict(CAUSES)["addr_in_use"]
#: A worker's error that a peer's death explains (gloo's pair closed, reset).
_CONSEQUENCE = re.compile(r"[Cc]losed by peer|remote worker crashing|[Cc]onnection reset")
#: The stock worker scripts a replay runs (shipped in the package: harness/scenario/workers/).
WORKERS = Path(__file__).resolve().parents[1] / "scenario" / "workers"


def _shape(plan: Plan, facts: Facts, job: JobFacts) -> dict[str, Any]:
    table: dict[str, Any] = {}
    nproc = job.nproc or facts.workers_per_node
    if nproc is None:
        nproc = 1
        plan.assumptions.append("no line states the workers per node: one")
    table["nproc_per_node"] = nproc
    seen = max((len(r) for r in job.restarts.values()), default=0)
    stated = job.max_restarts if job.max_restarts is not None else facts.max_restarts
    if stated is None and seen:
        plan.assumptions.append(f"max_restarts is not stated: {seen}, the restarts seen")
    table["max_restarts"] = stated if stated is not None else seen
    if job.pg_timeout is not None:
        # minutes become seconds, as the join's (plan's scale, else a timeout over a minute)
        scale = plan.scale if plan.scale != 1.0 or job.pg_timeout <= 60 else 1 / 60
        table["process_group_timeout"] = max(1.0, round(job.pg_timeout * scale, 1))
        if scale != 1.0:
            plan.assumptions.append(
                f"the process group's {job.pg_timeout:g} s timeout is "
                f"{table['process_group_timeout']:g} s here (minutes become seconds)"
            )
    return table


def _withheld(plan: Plan, job: JobFacts, nproc: int, hold: float) -> None:
    ranks = rank_keys(job)
    if not ranks and job.barrier is not None:
        world, count, line = job.barrier
        short = list(range(count, world)) if count < world else []
        if short:
            plan.assumptions.append(
                f"the store barrier counted {count} of {world} workers ({line.where}) and names "
                f"none: the last ranks {short} are taken for the ones that never joined"
            )
        ranks = [(r, line) for r in short]
    for rank, line in ranks:
        node, local = divmod(rank, nproc)
        if node >= plan.nodes:
            continue
        entry = {
            "kind": "pause",
            "nodes": [node],
            "part": f"worker {local}",
            "on": "workers_started",
            "on_node": node,
            "duration": hold,
        }
        why = (
            f"rank {rank} (node {node}'s worker {local}) never published its key: it is held "
            f"{hold:g} s from its start, past the process group's timeout"
        )
        plan.faults.append(PlannedFault(entry, why, [line]))


def _earlier(line: Line, than: Line) -> bool:
    """Whether ``line`` came before ``than``: by position in one file, else by time when both
    are dated (a restarted worker's stages follow its predecessor's crash)."""
    if line.source == than.source:
        return line.lineno < than.lineno
    return line.when is not None and than.when is not None and line.when < than.when


def _crashed(plan: Plan, job: JobFacts) -> None:
    """The first worker that failed on its own (not for a peer gone) before its agent
    restarted the group; the other agents restart for the membership change. When every
    failure is a peer gone and a whole node died, that death is the cause: no worker crash."""
    errors = [e for e in job.errors if e.cls and e.node in job.restarts]
    own = [e for e in errors if not _CONSEQUENCE.search(e.message)]
    if not own and not any(
        f.entry["kind"] == "kill" and "part" not in f.entry for f in plan.faults
    ):
        own = errors
    if own:
        first = min(own, key=lambda e: (e.line.when is None, e.line.when or 0.0))
        node, restarts = first.node, job.restarts[first.node]
        local = first.local if first.local is not None else 0
        # Killed from its start unless a collective of its group completed first: a kill
        # sent on 'pg_ready' arrives late, and the worker could finish the collective (its
        # peers then succeed and leave) before it dies, which the log's crash did not.
        before = [o for o in job.stages.get(node, []) if _earlier(o.line, first.line)]
        done = any(o.data["stage"] == "collective_done" for o in before)
        on = "pg_ready" if done else "workers_started"
        entry: dict[str, Any] = {"kind": "kill", "nodes": [node], "part": f"worker {local}"}
        entry.update(on=on, on_node=node)
        when = "" if done else " before any collective completed"
        why = (
            f"node {node}'s worker {local} failed ({first.cls.rsplit('.', 1)[-1]}){when} and its "
            f"agent restarted the group: the worker is killed once it reached '{on}'"
        )
        plan.faults.append(PlannedFault(entry, why, [first.line, restarts[0].line]))


#: How many times the process group's timeout torch 2.13's gloo spends on a full-mesh connect
#: that no peer answers before it gives up (measured: 5 s gave up after 26 s, 29.6 s after
#: about 140 s).
GLOO_CONNECT_FACTOR = 5


def _mesh_timeout(plan: Plan, job: JobFacts, mesh: WorkerError, table: dict[str, Any]) -> None:
    """No line states the group's timeout: take it from how long gloo's connect tried (its
    workers' start to its failure, on one clock), so the replay gives up as late."""
    began = next(
        (
            o.line
            for o in job.stages.get(mesh.node, [])
            if o.data.get("stage") == "workers_started" and o.line.fmt == mesh.line.fmt
        ),
        None,
    )
    if began is None or began.when is None or mesh.line.when is None:
        return
    tried = mesh.line.when - began.when
    if tried <= 0:
        return
    table["process_group_timeout"] = max(1.0, round(tried / GLOO_CONNECT_FACTOR, 1))
    plan.assumptions.append(
        f"no line states the process group's timeout: gloo's connect tried {tried:.1f} s "
        f"({began.where} to {mesh.line.where}), and torch 2.13's gloo gives up after "
        f"about {GLOO_CONNECT_FACTOR} times the group's timeout when no peer answers: "
        f"{table['process_group_timeout']:g} s"
    )


def _network(plan: Plan, facts: Facts, job: JobFacts, table: dict[str, Any]) -> None:
    mesh = next((e for e in job.errors if "connectFullMesh" in e.message), None)
    if mesh is not None and not rank_keys(job):  # not a late peer's key: the data ports
        entry = {"kind": "filter", "nodes": "all", "ports": ["store"]}
        why = (
            "gloo's full-mesh connect got no answer while the store answered: every port but "
            "the store's is filtered"
        )
        plan.faults.append(PlannedFault(entry, why, [mesh.line]))
        _netns(plan, facts, "a port filter is the kernel's")
        if job.pg_timeout is None:
            _mesh_timeout(plan, job, mesh, table)
    if job.store_lost is not None:
        table["local_addr"] = "localhost"
        plan.job_why.append(
            PlannedFault(
                {},
                "an agent lost c10d's store right after the rendezvous: the agents advertised "
                "a host name that resolves to loopback (F21; torch's c10d: --backend torch-c10d)",
                [job.store_lost],
            )
        )
        _netns(plan, facts, "a host name resolving to loopback needs hosts of their own")
    if job.no_endpoint is not None:
        table["endpoint"] = False
        plan.job_why.append(
            PlannedFault({}, "torchrun ran without --rdzv-endpoint (F24)", [job.no_endpoint])
        )


def _netns(plan: Plan, facts: Facts, why: str) -> None:
    if plan.world != "netns":
        plan.world = "netns"
        if facts.kernel_network is None:
            plan.assumptions.append(f"{why}: the scenario runs in the netns world")


def _ends(plan: Plan, job: JobFacts) -> None:
    """A node whose log shows its workers failing but not its agent's end: the agent fails
    the job (torch's ChildFailedError) once no restart is left."""
    for node, outcome in sorted(plan.expect.items()):
        failed = [e for e in job.errors if e.node == node and e.cls]
        if outcome in (ANY, "ok") and failed and not job.restarts.get(node):
            plan.expect[node] = "error"
            plan.assumptions.append(
                f"node {node}'s log shows its workers failing ({failed[0].line.where}) but not "
                "its agent's end: the agent fails the job (no restart left), 'error'"
            )


def _parts(plan: Plan, job: JobFacts) -> None:
    by_node: dict[int, str] = {n: o for n, o in plan.expect.items() if o not in (ANY, "absent")}
    dead = {n for n, o in plan.expect.items() if o == "killed"}
    dead |= {
        n
        for f in plan.faults
        if f.entry.get("kind") == "kill" and "part" not in f.entry
        for n in f.entry["nodes"]
    }
    for node, outcome in sorted(by_node.items()):
        if outcome == "killed":
            continue
        agent: dict[str, Any] = {"nodes": [node], "part": "agent", "outcome": outcome}
        if job.stages.get(node) or job.restarts:
            agent["restarts"] = len(job.restarts.get(node, []))
        plan.parts.append(agent)
        if outcome != "ok":
            failed = [e for e in job.errors if e.node == node and e.cls]
            seen = {e.outcome for e in failed}
            if any(_CONSEQUENCE.search(e.message) for e in failed):
                seen.add("connection_error")  # a peer gone: gloo's pair closed
            workers = sorted(seen | {"stopped"}) if seen else ["stopped"]
            held = [f for f in plan.faults if f.entry.get("kind") == "pause"]
            if any(node in f.entry["nodes"] for f in held):
                workers = sorted(set(workers) | {"timeout", "connection_error", "error"})
            if any(n != node for n in dead):
                # a peer died: gloo sees its pair close, or a send to it waits out the
                # group's timeout; which one is a race (J03's two ends)
                workers = sorted(set(workers) | {"connection_error", "timeout"})
            plan.parts.append({"nodes": [node], "part": "workers", "outcome": workers})


def job_plan(plan: Plan, facts: Facts, job: JobFacts) -> None:
    """Add the job's table, its faults on parts and its parts' expectations to ``plan``."""
    table = _shape(plan, facts, job)
    pg = table.get("process_group_timeout")
    hold = round(2 * (pg if pg is not None else plan.join), 1)
    # every worker imports torch on a machine of a few cores: room for that and the waits
    plan.hard = max(90.0, round(2 * plan.join + 2 * hold + 60))
    _withheld(plan, job, table["nproc_per_node"], hold)
    if job.barrier is not None and job.barrier[1] > job.barrier[0]:
        plan.not_reproduced.append(
            f"the store barrier counted {job.barrier[1]} workers for a world of "
            f"{job.barrier[0]} ({job.barrier[2].where}): stale keys of an earlier attempt"
        )
    in_use = next((e for e in job.errors if _IN_USE.search(e.message)), None)
    if in_use is not None and (WORKERS / "nested_launcher.py").is_file():
        table["script"] = str(WORKERS / "nested_launcher.py")
        plan.job_why.append(
            PlannedFault(
                {},
                "a worker's own store met EADDRINUSE on MASTER_PORT (F06): the workers run a "
                "launcher nested on it (the harness's nested_launcher.py)",
                [in_use.line],
            )
        )
    loops = [
        n
        for n, st in job.stages.items()
        if sum(o.data["stage"] == "collective_done" for o in st) > 1
    ]
    if loops and "script" not in table:
        table["script"] = str(WORKERS / "all_reduce_loop.py")
        line = next(o.line for o in job.stages[loops[0]] if o.data["stage"] == "collective_done")
        plan.job_why.append(
            PlannedFault(
                {},
                f"node {loops[0]}'s workers all-reduced again and again: the workers loop "
                "(the harness's all_reduce_loop.py)",
                [line],
            )
        )
    _crashed(plan, job)
    _network(plan, facts, job, table)
    plan.job = table
    _ends(plan, job)
    _parts(plan, job)
