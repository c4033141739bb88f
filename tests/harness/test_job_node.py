"""A job node (harness/world/jobs): torch's agent in the node process, gloo workers, the
stages they report and each part's result. Real torch agents and workers: marked ``torch``
and ``jobs`` (``tox -e jobs``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.world.process.jobs.stages import StageListener
from tests.harness.job_nodes import job_nodes, read

JOB_SECONDS = 240  # one small job's bound (torch imports on 2 busy cores)

#: A worker that dies after init_process_group in attempt 0 of node 1 (J04's user script).
CRASH_ONCE = Path(__file__).parents[2] / "scenarios" / "jobs" / "workers" / "crash_once.py"


def test_the_stage_listener_hands_on_each_workers_report_and_names_a_bad_one() -> None:
    seen: list[tuple[str, str, dict[str, object]]] = []
    listener = StageListener(lambda part, stage, t, fields: seen.append((part, stage, fields)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.sendto(b'{"local_rank": 1, "stage": "pg_ready", "t": 1.5, "rank": 3}', listener.path)
        sender.sendto(b"not json", listener.path)
    listener.close()
    assert seen == [
        ("worker 1", "pg_ready", {"rank": 3}),
        ("node", "bad_report", {"data": "not json"}),
    ]
    assert not Path(listener.path).exists()


@pytest.mark.torch
@pytest.mark.jobs
@pytest.mark.parametrize("backend", ["static", "torch-static", "torch-c10d"])
def test_two_job_nodes_report_their_stages_and_all_reduce_the_right_sum(
    tmp_path: Path, backend: str
) -> None:
    pytest.importorskip("torch.distributed.run")
    with job_nodes(tmp_path, 2, backend, {"nproc_per_node": 2}) as nodes:
        ends = [read(node, JOB_SECONDS) for node in nodes]
    for stages, results in ends:
        names = [(s["part"], s["stage"]) for s in stages]
        assert names[:2] == [("agent", "rendezvous_done"), ("agent", "workers_started")]
        for worker in ("worker 0", "worker 1"):
            assert names.index((worker, "pg_ready")) < names.index((worker, "collective_done"))
        agent, *workers = results
        assert (agent["part"], agent["status"], agent["restarts"]) == ("agent", "ok", 0)
        assert [w["status"] for w in workers] == ["ok", "ok"], results
        assert {w["world_size"] for w in workers} == {4}
        assert {w["result"] for w in workers} == {10.0}
    ranks = sorted(w["rank"] for _, results in ends for w in results[1:])
    assert ranks == [0, 1, 2, 3]


@pytest.mark.torch
@pytest.mark.jobs
def test_a_crashed_worker_restarts_its_group_and_the_job_completes_on_rdzv(tmp_path: Path) -> None:
    pytest.importorskip("torch.distributed.run")
    spec = {"script": str(CRASH_ONCE), "max_restarts": 1}
    with job_nodes(tmp_path, 2, "static", spec) as nodes:
        ends = [read(node, JOB_SECONDS) for node in nodes]
    stages = ends[1][0]
    failed = [s for s in stages if s["stage"] == "worker_failed"]
    assert failed and failed[0]["fields"]["message"] == "worker crashes on purpose in attempt 0"
    assert ("agent", "restart") in [(s["part"], s["stage"]) for s in stages]
    agent, worker = ends[1][1]
    assert (agent["status"], agent["restarts"]) == ("ok", 1), ends[1][1]
    assert (worker["status"], worker["rank"], worker["result"]) == ("ok", 1, 3.0)


@pytest.mark.torch
def test_the_reporting_agent_says_which_restarts_were_for_a_membership_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch restarts a failed group (against --max-restarts) and a healthy one when other
    agents wait to rendezvous (not counted); the report must tell them apart."""
    pytest.importorskip("torch")
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent, WorkerState

    from harness.world.process.jobs.agent import reporting_agent

    told: list[tuple[str, str, dict[str, object]]] = []
    agent_class = reporting_agent(lambda part, stage, fields: told.append((part, stage, fields)), 1)
    monkeypatch.setattr(SimpleElasticAgent, "_restart_workers", lambda self, group: None)
    agent = agent_class.__new__(agent_class)  # no launch: only the restart bookkeeping
    agent.harness_restarts = agent.harness_membership_restarts = 0

    class Group:
        state = WorkerState.HEALTHY

    agent._restart_workers(Group())  # another agent came back to rendezvous
    Group.state = WorkerState.FAILED
    agent._restart_workers(Group())  # a worker failed
    assert [fields for _, _, fields in told] == [
        {"restart": 1, "membership_restarts": 1, "cause": "membership"},
        {"restart": 2, "membership_restarts": 1, "cause": "failure"},
    ]
    assert [(part, stage) for part, stage, _ in told] == [("agent", "restart")] * 2
