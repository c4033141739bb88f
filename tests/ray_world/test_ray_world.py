"""The Ray world on a local Ray: the same scenario files, nodes as Ray actors.

Every run goes through the suite's ``run_one`` as ``harness run --world ray`` does, so a
passing report also says nothing was left behind: the world's teardown proves every actor
and the placement group of the run are gone (a leak is a violation).
"""

from __future__ import annotations

import threading

import pytest
from ray_helpers import ROOT, built, problems, run, scenario_file

from harness.run.runner import run_scenario
from harness.scenario.load import load
from harness.world.ray.session import RaySession

pytestmark = pytest.mark.ray


def _named_actors() -> list[str]:
    import ray

    return list(ray.util.list_named_actors())


def test_the_happy_path_passes_with_each_node_its_own_actor(ray_local: RaySession) -> None:
    report = run(scenario_file("happy-path.toml"))

    assert report.passed, problems(report)
    assert sorted(o.rank for o in report.outcomes) == list(range(8))
    assert all(
        o.placement and o.placement.startswith("ray: its own actor") for o in report.outcomes
    )
    assert len({o.pid for o in report.outcomes}) == 8  # one process per node
    assert _named_actors() == []


def test_a_missing_node_is_named_by_every_present_node(ray_local: RaySession) -> None:
    report = run(scenario_file("F03-node-never-arrives.toml"))

    assert report.passed, problems(report)
    assert [o.status for o in report.outcomes] == ["timeout", "timeout", "timeout", "absent"]


def test_a_killed_store_host_is_a_killed_actor_process(ray_local: RaySession) -> None:
    report = run(scenario_file("F16-store-host-crash.toml"))

    assert report.passed, problems(report)
    assert report.outcomes[0].status == "killed"
    kill = next(f for f in report.faults if f.kind == "kill")
    assert (kill.acted or {}).get("nodes killed") == 1


def test_a_latency_toxic_on_every_link_slows_but_does_not_fail(ray_local: RaySession) -> None:
    report = run(scenario_file("network-latency-under-timeout.toml"))

    assert report.passed, problems(report)
    latency = [f for f in report.faults if f.kind == "toxic"]
    assert latency and all(f.acted for f in latency), [f.acted for f in latency]


@pytest.mark.parametrize("pack", [None, 2], ids=["own-actors", "packed-actors"])
def test_two_restarts_of_a_node_on_one_event_start_one_replacement_on_ray(
    pack: int | None, ray_local: RaySession
) -> None:
    found = load(ROOT / "tests" / "harness" / "fuzz_data" / "two-restarts-one-event.toml")

    report = run(found.packed(pack), seed=0)

    assert report.passed, problems(report)  # issue 30: rank 2 was claimed by two replacements
    merged = report.faults[2]
    assert merged.acted == {"restarts merged with fault[1]'s (the node starts once)": 1}


@pytest.mark.parametrize("pack", [None, 2], ids=["own-actors", "packed-actors"])
def test_process_fault_pairs_at_one_instant_act_on_what_the_first_left_on_ray(
    pack: int | None, ray_local: RaySession
) -> None:
    found = load(ROOT / "tests" / "harness" / "fuzz_data" / "process-faults-meet-on-one-node.toml")

    report = run(found.packed(pack), seed=0)

    # node 1's restart is cancelled by its kill; its outcome is the oracle's: a kill through
    # the actor's host can land after the round's own failure reached node 1 (the local,
    # packed and netns tests pin 'killed'), so only what does not depend on that is asserted
    assert report.passed, problems(report)
    assert report.faults[1].acted == {"restarts cancelled (fault[0]'s: the node stays down)": 1}
    assert report.faults[3].acted == {"nodes restarted": 1}
    assert report.faults[5].note == "node 3 was down, fault[4]'s start pending"


def test_256_packed_nodes_rendezvous_in_a_few_actors(ray_local: RaySession) -> None:
    report = run(
        built({"name": "ray-packed-256", "nodes": 256, "pack": 64, "timeouts": {"join": 90}})
    )

    assert report.passed, problems(report)
    assert sorted(o.rank for o in report.outcomes) == list(range(256))
    assert len({o.pid for o in report.outcomes}) == 5  # node 0, then 4 actors of 64
    assert "64 nodes per actor as threads" in (report.outcomes[1].placement or "")


def test_a_scenario_needing_names_is_reported_unsupported_in_the_ray_world(
    ray_local: RaySession,
) -> None:
    report = run(scenario_file("F01-master-name-never-resolves.toml"))

    assert report.skipped is not None
    assert "the ray world cannot" in report.skipped


@pytest.mark.parametrize(
    "step", ["placement-group", "actors", "sync", "start", "release", "running"]
)
def test_a_run_stopped_at_any_start_up_step_ends_interrupted_with_no_actor_or_placement_group(
    ray_local: RaySession, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    from harness.world.ray import world

    scenario = built(
        {
            "name": "ray-stopped",
            "nodes": 4,
            "timeouts": {"join": 600},
            "fault": [{"kind": "absent", "nodes": [3]}],
        }
    ).in_world("ray")
    stop = threading.Event()
    seen: list[str] = []

    def at_step(name: str) -> None:  # what a Ctrl-C does: the suite sets the run's stop
        seen.append(name)
        if name == step:
            stop.set()

    monkeypatch.setattr(world, "announce", at_step)
    report = run_scenario(scenario, world.RayWorlds(), seed=1, stop=stop)

    assert step in seen
    assert report.interrupted, problems(report)
    assert report.error is None
    assert _named_actors() == []
    from ray.util.placement_group import placement_group_table

    states = {pg["state"] for pg in placement_group_table().values()}
    assert states <= {"REMOVED"}, states
