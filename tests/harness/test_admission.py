"""The one registry that admits a scenario (harness.run.worlds): the world it runs in, or why
it is skipped, decided before anything starts -- no proxy for a world whose links are not on
the run's proxy."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from harness.proxy.client import ToxiproxyClient
from harness.run.one import run_one
from harness.run.worlds import KINDS, admit, kind_of
from harness.scenario.load import parse


def _scenario(**fields: Any) -> Any:
    data = {"name": "admit", "description": "admission", "nodes": 2, **fields}
    return parse(data, "<admission>")


@contextlib.contextmanager
def _no_proxy() -> Iterator[ToxiproxyClient]:
    raise AssertionError("a proxy was started for a run that needs none")
    yield  # pragma: no cover


def test_a_netns_scenario_that_packs_nodes_is_skipped_before_any_proxy_starts() -> None:
    report = run_one(_scenario(world="netns", pack=2), _no_proxy, 1)
    assert report.error is None, report.error
    assert report.skipped is not None
    assert "the netns world runs one process per node" in report.skipped
    assert "packs 2 per process" in report.skipped
    assert report.skipped_by_world == "netns"


def test_a_fault_the_world_lacks_is_a_skip_decided_before_any_proxy_starts() -> None:
    scenario = _scenario(world="netns", fault=[{"kind": "squatter", "mode": "silent"}])
    report = run_one(scenario, _no_proxy, 1)
    assert report.error is None, report.error
    assert "the netns world cannot hold the store's port with a squatter" in str(report.skipped)
    assert "the local world can" in str(report.skipped)


def test_each_scenario_world_is_one_description_and_local_with_pack_is_the_packed_world() -> None:
    assert kind_of(_scenario()).name == "local"
    assert kind_of(_scenario(pack=2)).name == "packed"
    assert kind_of(_scenario(world="netns")).name == "netns"
    assert kind_of(_scenario(world="ray")).name == "ray"
    assert {name: kind.proxied for name, kind in KINDS.items()} == {
        "local": True,
        "packed": True,
        "netns": False,
        "ray": False,
    }


def test_a_scenario_its_backend_cannot_run_is_skipped_naming_no_world() -> None:
    admitted = admit(_scenario(backend="no_such_module_xyz:make"))
    assert admitted.skipped is not None
    assert admitted.skipped.startswith("no module named 'no_such_module_xyz'")
    assert admitted.by_world is None
