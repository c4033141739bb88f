"""Judging a job's parts (harness/run/job_checks.py through harness.run.checks.check): the
workers' RANKs, WORLD_SIZE and all-reduce result, restarts, exit codes, messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from harness.errors import ScenarioError
from harness.run.checks import check
from harness.run.model import NodeOutcome
from harness.scenario.load import parse
from harness.scenario.model import Scenario


@dataclass(frozen=True)
class Part:
    node: int
    part: str
    status: str = "ok"
    exitcode: int | None = 0
    rank: int | None = None
    world_size: int | None = 4
    result: float | None = 10.0
    restarts: int | None = 0
    message: str | None = None


def job(**extra: Any) -> Scenario:
    data: dict[str, Any] = {
        "name": "j",
        "description": "d",
        "nodes": 2,
        "job": {"nproc_per_node": 2},
    }
    return parse({**data, **extra}, "t.toml")


def healthy(sc: Scenario) -> tuple[list[NodeOutcome], list[Part]]:
    outcomes = [NodeOutcome(n, "ok", rank=n, world_size=2) for n in range(sc.nodes)]
    parts = [Part(n, "agent", rank=n, world_size=2, result=None) for n in range(sc.nodes)]
    parts += [Part(n, f"worker {i}", rank=2 * n + i) for n in range(2) for i in range(2)]
    return outcomes, parts


def checks(sc: Scenario, parts: list[Part]) -> list[tuple[str, str]]:
    outcomes, _ = healthy(sc)
    return [(v.check, v.message) for v in check(sc, outcomes, parts=parts)]


def test_a_healthy_job_passes() -> None:
    sc = job()
    assert checks(sc, healthy(sc)[1]) == []


def test_workers_sharing_a_rank_and_a_wrong_world_size_are_violations() -> None:
    sc = job()
    parts = healthy(sc)[1]
    parts[-1] = Part(1, "worker 1", rank=2, world_size=8)  # a stale barrier's world
    found = checks(sc, parts)
    assert ("job_ranks", "RANK 2 was given to 2 workers") in found
    assert (
        "job_world_size",
        "node 1 worker 1 got WORLD_SIZE 8, the job has 4 workers (2 nodes x 2)",
    ) in found


def test_a_wrong_all_reduce_result_is_a_collective_violation_for_the_default_worker_only(
    tmp_path: Any,
) -> None:
    sc = job()
    parts = healthy(sc)[1]
    parts[2] = Part(0, "worker 0", rank=0, result=7.0)
    assert checks(sc, parts) == [
        (
            "collective",
            "node 0 worker 0's all-reduce gave 7, expected 10 (the sum of rank + 1 over 4 workers)",
        )
    ]
    scripted = job(job={"nproc_per_node": 2, "script": "w.py"})
    assert checks(scripted, parts) == []


def test_a_backend_recorded_as_breaking_the_collective_is_known_not_failing() -> None:
    sc = job(backends={"torch-static": {"violates": ["collective"]}}).on_backend("torch-static")
    parts = healthy(sc)[1]
    parts[2] = Part(0, "worker 0", rank=0, result=7.0)
    (violation,) = check(sc, healthy(sc)[0], parts=parts)
    assert violation.check == "collective" and violation.known
    (stale,) = check(sc, healthy(sc)[0], parts=healthy(sc)[1])
    assert stale.check == "known_break"


def test_expected_parts_judge_outcome_message_exit_code_and_restarts() -> None:
    expect = {
        "outcome": "error",
        "parts": [
            {"nodes": [1], "part": "agent", "outcome": "error", "restarts": 1},
            {"nodes": [1], "part": "worker 0", "exitcode": 3, "message": "exited 3"},
        ],
    }
    sc = job(expect=expect)
    parts = healthy(sc)[1]
    parts[1] = Part(1, "agent", status="error", exitcode=1, restarts=0, message="workers failed")
    parts[4] = Part(1, "worker 0", status="error", exitcode=1, rank=2, message="exited 1")
    outcomes = [NodeOutcome(n, "error") for n in range(2)]
    found = [(v.check, v.message) for v in check(sc, outcomes, parts=parts)]
    assert found == [
        ("restarts", "node 1 agent restarted 0 time(s), expected 1"),
        ("part_message", "node 1 worker 0's message does not match /exited 3/: 'exited 1'"),
        ("part_exitcode", "node 1 worker 0 exited 1, expected 3"),
    ]


def test_restarts_may_be_a_list_of_counts_and_a_count_outside_it_is_named() -> None:
    # torch's c10d: an agent may restart for a failure and again for a membership change
    expect = {"parts": [{"nodes": "all", "part": "agent", "restarts": [1, 2]}]}
    sc = job(expect=expect)
    parts = healthy(sc)[1]
    parts[0] = Part(0, "agent", restarts=2)
    parts[1] = Part(1, "agent", restarts=3)
    assert checks(sc, parts) == [("restarts", "node 1 agent restarted 3 time(s), expected 1 or 2")]
    assert sc.expect.parts[0].allowed_restarts == (1, 2)


def test_a_negative_or_empty_restarts_expectation_is_refused() -> None:
    for bad in (-1, [], [1, -2]):
        with pytest.raises(ScenarioError, match="restarts"):
            job(expect={"parts": [{"nodes": "all", "part": "agent", "restarts": bad}]})


def test_workers_of_a_node_expected_ok_must_end_ok_and_a_missing_part_is_named() -> None:
    sc = job(expect={"parts": [{"nodes": [0], "part": "worker 5"}]})
    parts = healthy(sc)[1]
    parts[5] = Part(1, "worker 1", status="timeout", exitcode=1, rank=3, message="timed out")
    assert checks(sc, parts) == [
        ("part", "node 0 reported no part 'worker 5'"),
        ("part_outcome", "node 1 worker 1 ended 'timeout', expected 'ok': timed out"),
    ]


def swapped(sc: Scenario) -> tuple[list[NodeOutcome], list[Part]]:
    """Node 1 was given rank 0 and node 0 rank 1 (torch's c10d ranks by address and PID);
    rank 0's worker timed out, the other's was stopped; node 1 (rank 0) ended with an error."""
    outcomes = [
        NodeOutcome(0, "connection_error", rank=1, world_size=2, message="store lost"),
        NodeOutcome(1, "error", rank=0, world_size=2, message="workers failed"),
    ]
    parts = [
        Part(0, "agent", "connection_error", 1, rank=1, result=None),
        Part(1, "agent", "error", 1, rank=0, result=None),
        Part(0, "worker 0", "stopped", None, result=None),
        Part(1, "worker 0", "timeout", 1, result=None, message="wait timeout, keys: k/0"),
    ]
    return outcomes, parts


def test_expectations_by_rank_follow_the_rank_each_node_was_given_not_its_index() -> None:
    expect = {
        "outcome": "error",
        "nodes": [{"nodes": [1], "outcome": "connection_error"}],
        "parts": [{"nodes": [0], "part": "worker 0", "outcome": "timeout", "message": "k/0"}],
    }
    one = {"nproc_per_node": 1}
    by_rank = job(backend="torch-c10d", job=one, expect={**expect, "by_rank": True})
    outcomes, parts = swapped(by_rank)
    assert check(by_rank, outcomes, parts=parts) == []
    by_node = job(backend="torch-c10d", job=one, expect=expect)
    found = [(v.check, v.message) for v in check(by_node, outcomes, parts=parts)]
    assert ("outcome", "node 0 ended 'connection_error', expected 'error': store lost") in found
    assert ("part_outcome", "node 0 worker 0 ended 'stopped', expected 'timeout'") in found


def test_a_violation_by_rank_names_the_node_and_its_rank_and_a_rank_no_node_was_given() -> None:
    expect = {
        "outcome": ["error", "connection_error"],
        "by_rank": True,
        "nodes": [{"nodes": [0], "outcome": "connection_error"}],
        "parts": [
            {"nodes": [1], "part": "worker 0", "outcome": "timeout"},
            {"nodes": [2], "part": "agent", "outcome": "error"},
        ],
    }
    sc = job(backend="torch-c10d", nodes=3, job={"nproc_per_node": 1}, expect=expect)
    outcomes, parts = swapped(sc)
    found = [(v.check, v.message) for v in check(sc, outcomes, parts=parts)]
    assert (
        "outcome",
        "node 1 (rank 0) ended 'error', expected 'connection_error': workers failed",
    ) in found
    assert ("part_outcome", "node 0 (rank 1) worker 0 ended 'stopped', expected 'timeout'") in found
    assert ("part", "rank 2 (no node was given it) reported no part 'agent'") in found
