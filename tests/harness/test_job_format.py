"""The ``[job]`` table and ``[[expect.parts]]`` (harness/scenario/job.py): what the loader
takes, and every mistake named with its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import ScenarioError
from harness.scenario.load import load, parse

BASE: dict[str, Any] = {"name": "j", "description": "d", "nodes": 2}


def problems(**extra: Any) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse({**BASE, **extra}, "test.toml")
    return list(info.value.problems)


def test_a_job_table_takes_torchruns_keys_and_defaults_to_one_worker_without_restarts() -> None:
    sc = parse({**BASE, "job": {}}, "t.toml")
    assert sc.job is not None
    assert (sc.job.nproc_per_node, sc.job.max_restarts, sc.job.script) == (1, 0, None)
    sc = parse({**BASE, "job": {"nproc_per_node": 2, "max_restarts": 1}}, "t.toml")
    assert sc.job is not None and sc.job.nproc_per_node == 2 and sc.job.max_restarts == 1
    assert parse(BASE, "t.toml").job is None


def test_bad_job_keys_are_named_with_their_key_paths() -> None:
    found = problems(job={"nproc_per_node": 0, "max_restart": 1, "monitor_interval": -1})
    assert any(p.startswith("job.nproc_per_node: got 0") for p in found), found
    assert any(p.startswith("job.max_restart:") and "max_restarts" in p for p in found), found
    assert any(p.startswith("job.monitor_interval: got -1") for p in found), found


def test_a_job_bound_reaching_the_hard_deadline_is_rejected() -> None:
    (problem,) = problems(timeouts={"join": 5}, job={"exit_barrier_timeout": 25})
    assert problem.startswith("job.exit_barrier_timeout: got 25; the hard deadline (25 s)")


def test_a_fault_can_fire_on_a_job_stage() -> None:
    kill = {"kind": "kill", "nodes": [1], "on": "pg_ready", "on_node": 1, "after": 0.5}
    sc = parse({**BASE, "job": {}, "fault": [kill]}, "t.toml")
    trigger = sc.fault[0].when()
    assert trigger is not None and (trigger.on, trigger.on_node) == ("pg_ready", 1)


def test_expected_parts_name_a_part_and_existing_nodes() -> None:
    parts = [
        {"nodes": [1], "part": "agent", "outcome": "error", "restarts": 1},
        {"nodes": "all", "part": "workers", "outcome": ["ok", "stopped"], "exitcode": 0},
    ]
    sc = parse({**BASE, "job": {}, "expect": {"parts": parts}}, "t.toml")
    assert [p.outcomes for p in sc.expect.parts] == [("error",), ("ok", "stopped")]
    found = problems(job={}, expect={"parts": [{"nodes": [5], "part": "worker x"}]})
    assert any(p.startswith("expect.parts[0].part:") for p in found), found
    found = problems(job={}, expect={"parts": [{"nodes": [5], "part": "agent"}]})
    assert found == ["expect.parts[0].nodes: node 5 does not exist; the scenario has nodes 0..1"]


def test_expected_parts_without_a_job_are_rejected() -> None:
    (problem,) = problems(expect={"parts": [{"nodes": [0], "part": "agent"}]})
    assert problem == (
        "expect.parts[0]: the scenario has no [job] table: only a job's nodes have parts"
    )


def test_a_job_script_must_be_a_file_next_to_the_scenario(tmp_path: Path) -> None:
    file = tmp_path / "s.toml"
    file.write_text('name = "s"\ndescription = "d"\nnodes = 2\n[job]\nscript = "w.py"\n')
    with pytest.raises(ScenarioError) as info:
        load(file)
    looked = tmp_path / "w.py"
    assert list(info.value.problems) == [
        f"job.script: no file 'w.py' (looked for {looked}); give a path relative to the file"
    ]
    (tmp_path / "w.py").write_text("print('hi')\n")
    job = load(file).job
    assert job is not None and job.script == "w.py"


def test_a_job_spec_resolves_the_script_next_to_the_file_and_defaults_to_the_join_timeout(
    tmp_path: Path,
) -> None:
    from harness.run.jobs import job_spec

    (tmp_path / "w.py").write_text("")
    sc = parse(
        {**BASE, "timeouts": {"join": 7}, "job": {"script": "w.py"}}, str(tmp_path / "s.toml")
    )
    spec = job_spec(sc)
    assert spec is not None
    assert spec.script == str(tmp_path / "w.py")
    assert (spec.exit_barrier_timeout, spec.process_group_timeout) == (7, 7)
    assert job_spec(parse(BASE, "t.toml")) is None


def test_a_job_on_a_backend_or_world_that_cannot_run_it_is_skipped_naming_what_can() -> None:
    from harness.run.worlds import admit

    sc = parse({**BASE, "job": {}}, "t.toml")
    on_handler = admit(sc.on_backend("m:f"))
    assert on_handler.skipped is not None and on_handler.by_world is None
    assert "a job runs on a torchrun rendezvous backend" in on_handler.skipped
    assert "not 'm:f'" in on_handler.skipped
    packed = admit(sc.packed(4))
    assert packed.by_world == "packed", packed
    assert packed.skipped is not None and "[job]" in packed.skipped
    assert "the local world can" in packed.skipped
    assert admit(parse(BASE, "t.toml").packed(4)).skipped is None  # not a job: packs


def test_a_faults_part_must_be_the_node_the_agent_or_a_worker_by_local_rank() -> None:
    kill = {"kind": "kill", "nodes": [1], "at": 1}
    (problem,) = problems(job={}, fault=[{**kill, "part": "workers"}])
    assert problem.startswith("fault[0].part: got 'workers'; a part is 'node'"), problem
    assert "'worker N'" in problem
    sc = parse({**BASE, "job": {}, "fault": [{**kill, "part": "worker 0"}]}, "t.toml")
    assert sc.fault[0].label == "kill (worker 0)"
    assert parse({**BASE, "fault": [{**kill, "part": "node"}]}, "t.toml").fault[0].label == "kill"


def test_a_part_no_node_has_is_named_with_what_the_job_has() -> None:
    kill = {"kind": "kill", "nodes": [1], "at": 1}
    (problem,) = problems(fault=[{**kill, "part": "agent"}])
    assert problem.startswith("fault[0].part: 'agent' is a part of a job node"), problem
    assert "no [job] table" in problem
    (problem,) = problems(job={"nproc_per_node": 2}, fault=[{**kill, "part": "worker 2"}])
    assert problem == (
        "fault[0].part: 'worker 2' does not exist; each node has 2 worker(s) "
        "(job.nproc_per_node): worker 0..1"
    )


def test_a_worker_is_restarted_by_its_agent_not_by_a_restart_fault() -> None:
    restart = {"kind": "restart", "nodes": [1], "at": 1, "part": "worker 0"}
    (problem,) = problems(job={}, fault=[restart])
    assert "a worker is restarted by its agent (job.max_restarts)" in problem, problem
    parse({**BASE, "job": {}, "fault": [{**restart, "part": "agent"}]}, "t.toml")


def test_a_job_without_an_endpoint_reaches_its_nodes_spec() -> None:
    from harness.run.jobs import job_spec

    spec = job_spec(parse({**BASE, "job": {"endpoint": False}}, "t.toml"))
    assert spec is not None and spec.endpoint is False
    default = job_spec(parse({**BASE, "job": {}}, "t.toml"))
    assert default is not None and default.endpoint is True


def test_a_jobs_local_addr_reaches_its_nodes_spec_and_an_empty_one_is_refused() -> None:
    from harness.run.jobs import job_spec

    spec = job_spec(parse({**BASE, "job": {"local_addr": "localhost"}}, "t.toml"))
    assert spec is not None and spec.local_addr == "localhost"
    default = job_spec(parse({**BASE, "job": {}}, "t.toml"))
    assert default is not None and default.local_addr is None  # the world's choice
    (problem,) = problems(job={"local_addr": ""})
    assert problem.startswith("job.local_addr"), problem


def test_a_job_specs_local_addr_is_torchruns_local_addr_in_the_launch_config() -> None:
    # torch's c10d hosts the workers' store on rank 0's advertised address (the netns world
    # gives each node's own: the machine's host name resolves to loopback in every namespace,
    # and J00 on c10d there failed without it; J08 runs with it)
    pytest.importorskip("torch")
    from harness.world.process.jobs.agent import launch_config
    from harness.world.process.torch_backends import HandlerArgs
    from harness.world.specs import JobSpec

    args = HandlerArgs("127.0.0.1:1", "run", 1, 2, 5.0, {}, None)
    config = launch_config(JobSpec(local_addr="198.18.0.3"), "torch-c10d", args)
    assert config.local_addr == "198.18.0.3"
    assert launch_config(JobSpec(), "torch-c10d", args).local_addr is None
