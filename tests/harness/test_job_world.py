"""Job scenarios through the runner in the local world: each node a torchrun agent with gloo
workers (docs/jobs.md). Real torch agents and workers: marked ``torch`` and ``jobs``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.scenario.load import parse

# a job's bound: torch in every agent and worker, on 2 cores other sessions load too
pytestmark = [pytest.mark.torch, pytest.mark.jobs, pytest.mark.timeout(900)]

CRASH = """
import os, torch.distributed as dist
dist.init_process_group("gloo")
if os.environ["GROUP_RANK"] == "1":
    raise RuntimeError("node 1's worker gives up")
dist.destroy_process_group()
"""


def _run(tmp: Path, data: dict[str, Any]) -> Any:
    pytest.importorskip("torch.distributed.run")
    from harness.run.suite import embedded_proxy, run_one

    base = {"name": "job", "description": "d", "timeouts": {"join": 20, "hard": 120}}
    scenario = parse({**base, **data}, str(tmp / "job.toml"))
    return run_one(scenario, embedded_proxy, 27)


def test_each_part_of_a_job_node_reaches_the_report_and_is_judged(tmp_path: Path) -> None:
    (tmp_path / "crash.py").write_text(CRASH)
    report = _run(
        tmp_path,
        {
            "nodes": 2,
            "job": {"script": "crash.py"},
            "expect": {  # node 0's worker needs node 1's no more once its group is up
                "outcome": "ok",
                "nodes": [{"nodes": [1], "outcome": "error"}],
                "parts": [
                    {"nodes": [1], "part": "worker 0", "outcome": "error", "exitcode": 1},
                    {"nodes": [1], "part": "agent", "message": "workers failed: worker 0 exit 1"},
                ],
            },
        },
    )
    assert report.passed, (report.violations, [(o.status, o.message) for o in report.outcomes])
    node1 = report.outcomes[1]
    assert [p.part for p in node1.parts] == ["agent", "worker 0"]
    assert node1.parts[1].message == "node 1's worker gives up"
    stages = [(e.part, e.event) for e in node1.events]
    assert ("agent", "rendezvous_done") in stages and ("worker 0", "pg_ready") in stages
    assert ("node", "torch_imported") in stages


LOOP = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
while True:
    dist.all_reduce(torch.tensor([1.0]))
"""


def test_a_fault_fires_on_a_workers_stage(tmp_path: Path) -> None:
    # node 1 is killed on its worker's first collective_done: node 0's worker, all-reducing
    # in a loop, meets the closed peer and its agent fails the job
    (tmp_path / "loop.py").write_text(LOOP)
    report = _run(
        tmp_path,
        {
            "nodes": 2,
            "job": {"script": "loop.py"},
            "fault": [{"kind": "kill", "nodes": [1], "on": "collective_done", "on_node": 1}],
            "expect": {
                "outcome": "error",
                "nodes": [{"nodes": [1], "outcome": "killed"}],
                "parts": [
                    {"nodes": [0], "part": "agent", "outcome": "error"},
                    {"nodes": [0], "part": "worker 0", "outcome": "connection_error"},
                ],
            },
        },
    )
    assert report.passed, (report.violations, [(o.status, o.message) for o in report.outcomes])
    (record,) = report.faults
    assert record.acted, record
    assert report.outcomes[1].status == "killed"


# TORCHELASTIC_RESTART_COUNT counts the restarts a failure caused: node 0's agent restarts
# for the membership change (node 1 rendezvousing again) and its count stays 0
WAITS_FIRST_TIME = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["GROUP_RANK"] == "1":
    time.sleep(600)  # node 1's first attempt waits here for the harness's kill
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print("sum", value.item())
dist.destroy_process_group()
"""


def test_a_worker_killed_alone_is_restarted_by_its_agent_and_the_job_completes(
    tmp_path: Path,
) -> None:
    (tmp_path / "waits.py").write_text(WAITS_FIRST_TIME)
    kill = {"kind": "kill", "nodes": [1], "part": "worker 0", "on": "pg_ready", "on_node": 1}
    report = _run(
        tmp_path,
        {
            "nodes": 2,
            "job": {"script": "waits.py", "max_restarts": 1},
            "fault": [kill],
            "expect": {
                "outcome": "ok",
                "parts": [{"nodes": "all", "part": "agent", "outcome": "ok", "restarts": 1}],
            },
        },
    )
    assert report.passed, (report.violations, [(o.status, o.message) for o in report.outcomes])
    (record,) = report.faults
    assert record.acted == {"workers killed": 1}, record
    workers = [p for o in report.outcomes for p in o.parts if p.part == "worker 0"]
    assert [(w.status, w.result) for w in workers] == [("ok", 3.0)] * 2


def test_an_agent_killed_alone_leaves_its_worker_to_die_by_its_death_signal(
    tmp_path: Path,
) -> None:
    # node 1's worker all-reduces in a loop: had it outlived its agent, node 0's worker
    # would loop on with it to the hard deadline instead of meeting a closed peer
    (tmp_path / "loop.py").write_text(LOOP)
    kill = {"kind": "kill", "nodes": [1], "part": "agent", "on": "collective_done", "on_node": 1}
    report = _run(
        tmp_path,
        {
            "nodes": 2,
            "job": {"script": "loop.py"},
            "fault": [kill],
            "expect": {
                "outcome": "error",
                "nodes": [{"nodes": [1], "outcome": "killed", "message": "its agent killed"}],
                "parts": [{"nodes": [0], "part": "worker 0", "outcome": "connection_error"}],
            },
        },
    )
    assert report.passed, (report.violations, [(o.status, o.message) for o in report.outcomes])
    (record,) = report.faults
    assert record.acted == {"agents killed": 1}, record
    started = [e for e in report.outcomes[1].events if e.event == "workers_started"]
    (pid,) = started[-1].fields["pids"]
    psutil = pytest.importorskip("psutil")
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_worker_paused_alone_holds_the_collective_and_the_job_completes_once_resumed(
    tmp_path: Path,
) -> None:
    # node 1's worker is stopped (SIGSTOP) as its process group comes up and continued 1.5 s
    # later: its peer waits in the all-reduce, its agent sees a live worker, nothing restarts
    pause = {
        "kind": "pause",
        "nodes": [1],
        "part": "worker 0",
        "on": "pg_ready",
        "on_node": 1,
        "duration": 1.5,
    }
    report = _run(
        tmp_path,
        {
            "nodes": 2,
            "job": {},
            "fault": [pause],
            "expect": {
                "outcome": "ok",
                "parts": [{"nodes": "all", "part": "agent", "outcome": "ok", "restarts": 0}],
            },
        },
    )
    assert report.passed, (report.violations, [(o.status, o.message) for o in report.outcomes])
    (record,) = report.faults
    assert record.acted == {"workers paused": 1}, record
    workers = [p for o in report.outcomes for p in o.parts if p.part == "worker 0"]
    assert [(w.status, w.result) for w in workers] == [("ok", 3.0)] * 2
