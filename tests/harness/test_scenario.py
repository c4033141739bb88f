"""Scenario files: validation names the file, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import ScenarioError
from harness.scenario import Scenario, load, load_many, parse

BASE: dict[str, Any] = {"name": "s", "description": "d", "nodes": 4}


def scenario(**extra: Any) -> Scenario:
    return parse({**BASE, **extra}, "test.toml")


def problems(**extra: Any) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        scenario(**extra)
    assert info.value.source == "test.toml"
    return list(info.value.problems)


def test_a_minimal_scenario_gets_defaults() -> None:
    sc = scenario()
    assert sc.backend == "static"
    assert sc.timeouts.join == 10.0
    assert sc.timeouts.hard_deadline == 35.0
    assert sc.endpoint.host == "127.0.0.1"
    assert sc.expected(3).outcome == "ok"


def test_unknown_keys_are_rejected_with_their_path() -> None:
    assert problems(colour="red") == ["colour: unknown key"]
    assert problems(timeouts={"join": 1, "joins": 2}) == ["timeouts.joins: unknown key"]


def test_a_bad_toxic_type_names_the_fault_and_the_allowed_values() -> None:
    (problem,) = problems(fault=[{"kind": "toxic", "type": "latencyy"}])
    assert problem.startswith("fault[0].type: got 'latencyy'; allowed: 'latency'")


def test_an_unknown_fault_kind_lists_the_kinds() -> None:
    (problem,) = problems(fault=[{"kind": "meteor"}])
    assert problem.startswith("fault[0]: kind: got 'meteor'; allowed:")
    assert "'squatter'" in problem


def test_missing_required_keys_are_named() -> None:
    with pytest.raises(ScenarioError, match="description: required key is missing"):
        parse({"name": "s", "nodes": 2}, "x.toml")


def test_node_indexes_must_exist() -> None:
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [4], "at": 1}])
    assert "fault[0].nodes names node 4, but the scenario has nodes 0..3" in problem


def test_network_faults_cannot_target_node_0() -> None:
    (problem,) = problems(fault=[{"kind": "link_down", "nodes": "all"}])
    assert "node 0, which hosts the store" in problem


def test_a_dns_fault_needs_a_host_name() -> None:
    (problem,) = problems(fault=[{"kind": "dns"}])
    assert "endpoint.host '127.0.0.1' is an IP address" in problem
    assert scenario(fault=[{"kind": "dns"}], endpoint={"host": "store.rdzv.test"})


def test_a_trigger_is_a_time_or_an_event_of_a_node_not_both() -> None:
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [1], "at": 1, "on": "joined"}])
    assert "either 'at'" in problem
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [1], "on": "joined"}])
    assert "needs 'on_node'" in problem


def test_faults_on_an_absent_node_are_rejected() -> None:
    (problem,) = problems(
        fault=[{"kind": "absent", "nodes": [2]}, {"kind": "pause", "nodes": [2], "at": 0}]
    )
    assert "never starts" in problem


def test_an_expectation_message_must_be_a_valid_regular_expression() -> None:
    (problem,) = problems(expect={"nodes": [{"nodes": [1], "outcome": "ok", "message": "("}]})
    assert "not a valid regular expression" in problem


def test_elapsed_bounds_must_be_ordered() -> None:
    (problem,) = problems(
        expect={"nodes": [{"nodes": [1], "outcome": "ok", "elapsed": [3.0, 1.0]}]}
    )
    assert "low <= high" in problem


def test_the_last_matching_expectation_wins() -> None:
    sc = scenario(
        expect={
            "outcome": "timeout",
            "nodes": [
                {"nodes": "all", "outcome": "connection_error"},
                {"nodes": [2], "outcome": "absent"},
            ],
        }
    )
    assert [sc.expected(n).outcome for n in range(4)] == [
        "connection_error",
        "connection_error",
        "absent",
        "connection_error",
    ]


def test_a_backend_is_static_torch_static_or_a_factory_path() -> None:
    assert scenario(backend="my_pkg.mod:factory").backend == "my_pkg.mod:factory"
    (problem,) = problems(backend="etcd")
    assert "allowed: 'static', 'torch-static' or 'module:factory'" in problem


def test_load_names_the_file_for_bad_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: not valid TOML"):
        load(bad)


def test_load_many_reads_directories_sorted_and_rejects_missing_paths(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / f"{name}.toml").write_text(f'name = "{name}"\ndescription = "x"\nnodes = 2\n')
    assert [s.name for s in load_many([tmp_path])] == ["a", "b"]
    with pytest.raises(ScenarioError, match="no such file or directory"):
        load_many([tmp_path / "nope"])


def test_every_shipped_scenario_is_valid_and_cites_its_sources() -> None:
    shipped = load_many([Path(__file__).resolve().parents[2] / "scenarios"])
    assert len(shipped) >= 12
    kinds = {f.kind for s in shipped for f in s.fault}
    assert kinds >= {"toxic", "link_down", "absent", "late_start", "kill", "pause"}
    assert kinds >= {"squatter", "dns", "store_op"}
    modes = {f.mode for s in shipped for f in s.fault if f.kind == "squatter"}
    assert modes == {"ipv4-wildcard", "ipv6-wildcard", "loopback", "silent", "http"}
    cited = [s for s in shipped if s.field_failure]
    assert len(cited) * 2 > len(shipped)
    assert all(s.sources for s in cited)


def test_an_outcome_may_be_a_list_meaning_any_of_them() -> None:
    sc = scenario(
        nodes=2,
        expect={"outcome": ["ok", "timeout"], "nodes": [{"nodes": [1], "outcome": ["killed"]}]},
    )
    assert sc.expected(0).outcome == ("ok", "timeout")
    assert sc.expected(1).outcome == ("killed",)


def test_an_empty_outcome_list_is_rejected() -> None:
    assert problems(expect={"outcome": []}) == [
        "expect.outcome: Value error, an outcome list needs at least one outcome"
    ]


def test_a_backend_section_replaces_the_expectations_on_that_backend_only() -> None:
    sc = scenario(
        nodes=2,
        expect={"outcome": "timeout"},
        backends={"torch-static": {"note": "why", "expect": {"outcome": "ok"}}},
    )
    assert sc.expected(1).outcome == "timeout"
    on_torch = sc.on_backend("torch-static")
    assert on_torch.backend == "torch-static"
    assert on_torch.expected(1).outcome == "ok"
    assert on_torch.variant.note == "why"
    assert sc.on_backend("tests.x:make").expected(1).outcome == "timeout"


def test_backend_sections_are_validated_like_the_rest() -> None:
    (found,) = problems(backends={"nope": {}})
    assert found.startswith("backends: Value error, unknown backend 'nope'; allowed: 'static'")
    (found,) = problems(backends={"torch-static": {"violates": ["speed"]}})
    assert found.startswith("backends.torch-static.violates[0]: got 'speed'; allowed:")
    (found,) = problems(
        nodes=2, backends={"torch-static": {"expect": {"nodes": [{"nodes": [5], "outcome": "ok"}]}}}
    )
    assert "backends.torch-static.expect.nodes[0].nodes names node 5" in found


def test_switching_to_an_unknown_backend_names_the_scenario() -> None:
    with pytest.raises(ScenarioError, match="backend: unknown backend 'bogus'"):
        scenario().on_backend("bogus")
