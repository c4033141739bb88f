"""The same scenario files give the same outcomes in the local world and in the Ray world.

Each file runs once in each world (the same seed); both runs must pass their own checks and
expectations, and every node must end the same way in both.
"""

from __future__ import annotations

import pytest
from ray_helpers import problems, run, scenario_file, statuses

from harness.world.ray.session import RaySession

pytestmark = pytest.mark.ray

FILES = [
    "happy-path.toml",
    "F03-node-never-arrives.toml",
    "F16-store-host-crash.toml",
    "link-down-then-up.toml",
    "restart-after-join.toml",
    "paused-node.toml",
    "world-size-mismatch.toml",
]


@pytest.mark.parametrize("name", FILES)
def test_a_scenario_file_ends_the_same_way_in_the_local_and_the_ray_world(
    name: str, ray_local: RaySession
) -> None:
    scenario = scenario_file(name)
    local = run(scenario, world="local")
    on_ray = run(scenario, world="ray")

    assert local.passed, problems(local)
    assert on_ray.passed, problems(on_ray)
    assert statuses(on_ray) == statuses(local)
