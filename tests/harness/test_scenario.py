"""Scenario files: validation names the file, the key and what is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.errors import InvalidScenariosError, ScenarioError
from harness.scenario.load import load, load_many, parse
from harness.scenario.model import Scenario

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
    assert problems(timeouts={"join": 1, "zzz": 2}) == ["timeouts.zzz: unknown key"]


def test_an_unknown_key_close_to_a_key_of_its_table_gets_a_suggestion() -> None:
    assert problems(timeouts={"hardd": 3}) == ["timeouts.hardd: unknown key; did you mean 'hard'?"]
    assert problems(timeouts={"join": 1, "joins": 2}) == [
        "timeouts.joins: unknown key; did you mean 'join'?"
    ]
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [1], "att": 1.0}])
    assert problem == "fault[0].att: unknown key; did you mean 'at'?"


def test_a_bad_toxic_type_names_the_fault_and_the_allowed_values() -> None:
    (problem,) = problems(fault=[{"kind": "toxic", "type": "latencyy"}])
    assert problem.startswith(
        "fault[0].type: got 'latencyy'; did you mean 'latency'? allowed: 'latency'"
    )


def test_a_toxic_attribute_its_type_does_not_take_is_rejected_with_a_suggestion() -> None:
    (problem,) = problems(fault=[{"kind": "toxic", "type": "latency", "attributes": {"latncy": 9}}])
    assert problem == (
        "fault[0].attributes: 'latncy' is not an attribute of a latency toxic; did you mean "
        "'latency'? a latency toxic takes: 'latency', 'jitter'"
    )
    (problem,) = problems(fault=[{"kind": "toxic", "type": "noop", "attributes": {"delay": 1}}])
    said = "'delay' is not an attribute of a noop toxic; a noop toxic takes none"
    assert problem == f"fault[0].attributes: {said}"
    good = {"average_size": 2, "size_variation": 1, "delay": 5}
    assert scenario(fault=[{"kind": "toxic", "type": "slicer", "attributes": good}]).fault


def test_a_toxic_attribute_written_as_a_key_of_the_fault_says_where_it_goes() -> None:
    (problem,) = problems(fault=[{"kind": "toxic", "type": "bandwidth", "rate": 10}])
    assert problem == (
        "fault[0].rate: unknown key; a bandwidth toxic's 'rate' goes in its attributes: "
        "attributes = { rate = ... }"
    )
    (problem,) = problems(fault=[{"kind": "toxic", "type": "latency", "durration": 1}])
    assert problem == "fault[0].durration: unknown key; did you mean 'duration'?"


def test_an_unknown_fault_kind_lists_the_kinds() -> None:
    with pytest.raises(ScenarioError, match=r"fault\[0\]\.kind: got 'meteor'; allowed: 'toxic', "):
        scenario(fault=[{"kind": "meteor"}])
    with pytest.raises(ScenarioError, match=r"fault\[0\]\.kind: required key is missing; allowed"):
        scenario(fault=[{"type": "latency"}])


def test_missing_required_keys_are_named() -> None:
    with pytest.raises(ScenarioError, match="description: required key is missing"):
        parse({"name": "s", "nodes": 2}, "x.toml")


def test_node_indexes_must_exist() -> None:
    with pytest.raises(
        ScenarioError,
        match=r"fault\[0\]\.nodes: node 4 does not exist; the scenario has nodes 0\.\.3",
    ):
        scenario(fault=[{"kind": "kill", "nodes": [4], "at": 1}])


def test_idle_faults_must_name_faults_of_the_file_and_follow_the_backend() -> None:
    kill = {"kind": "kill", "nodes": [1], "at": 1}
    assert problems(fault=[kill], expect={"idle_faults": [0, 2]}) == [
        "expect.idle_faults[1]: fault 2 does not exist; the scenario has faults 0..0"
    ]
    assert problems(
        backends={"torch-static": {"expect": {"idle_faults": [0]}}}
    ) == [("backends.torch-static.expect.idle_faults[0]: fault 0 does not exist; "
          "the scenario has no fault")]  # fmt: skip
    sc = scenario(
        fault=[kill, kill],
        expect={"idle_faults": [1]},
        backends={"torch-static": {"expect": {"idle_faults": [0]}}},
    )
    assert sc.idle_faults == {1}
    assert sc.on_backend("torch-static").idle_faults == {0}
    assert scenario().idle_faults == frozenset()


def test_network_faults_cannot_target_node_0() -> None:
    with pytest.raises(
        ScenarioError, match=r"fault\[0\]\.nodes: got 'all', which includes node 0; node 0 hosts"
    ):
        scenario(fault=[{"kind": "link_down", "nodes": "all"}])


def test_a_dns_fault_needs_a_host_name() -> None:
    with pytest.raises(ScenarioError, match=r"endpoint\.host '127\.0\.0\.1' is an IP address"):
        scenario(fault=[{"kind": "dns"}])
    assert scenario(fault=[{"kind": "dns"}], endpoint={"host": "store.rdzv.test"})


def test_a_trigger_is_a_time_or_an_event_of_a_node_not_both() -> None:
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [1], "at": 1, "on": "joined"}])
    assert "either 'at'" in problem
    (problem,) = problems(fault=[{"kind": "kill", "nodes": [1], "on": "joined"}])
    assert "needs 'on_node'" in problem


def test_faults_on_an_absent_node_are_rejected() -> None:
    with pytest.raises(
        ScenarioError,
        match=r"fault\[1\]\.nodes: got \[2, 3\]; node\(s\) \[2\] never start: an 'absent' "
        "fault names them, so a pause cannot reach them",
    ):
        scenario(
            fault=[{"kind": "absent", "nodes": [2]}, {"kind": "pause", "nodes": [2, 3], "at": 0}]
        )


def test_an_expectation_message_must_be_a_valid_regular_expression() -> None:
    (problem,) = problems(expect={"nodes": [{"nodes": [1], "outcome": "ok", "message": "("}]})
    assert "not a valid regular expression" in problem


def test_elapsed_bounds_must_be_ordered() -> None:
    (problem,) = problems(
        expect={"nodes": [{"nodes": [1], "outcome": "ok", "elapsed": [3.0, 1.0]}]}
    )
    assert problem == (
        "expect.nodes[0].elapsed: got [3.0, 1.0]; must be [low, high] with 0 <= low <= high"
    )
    with pytest.raises(ScenarioError, match=r"elapsed: got \[3\.0\]; must be \[low, high\]"):
        scenario(expect={"nodes": [{"nodes": [1], "outcome": "ok", "elapsed": [3.0]}]})


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


def test_a_backend_is_static_torch_static_torch_c10d_or_a_factory_path() -> None:
    assert scenario(backend="my_pkg.mod:factory").backend == "my_pkg.mod:factory"
    assert scenario(backend="torch-c10d").backend == "torch-c10d"
    with pytest.raises(
        ScenarioError,
        match="backend: unknown backend 'etcd'; allowed: 'static', 'torch-static', "
        "'torch-c10d' or 'module:factory'",
    ):
        scenario(backend="etcd")


def test_load_names_the_file_for_bad_toml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: not valid TOML"):
        load(bad)


def test_load_many_reads_directories_sorted_and_rejects_missing_paths(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / f"{name}.toml").write_text(f'name = "{name}"\ndescription = "x"\nnodes = 2\n')
    assert [s.name for s in load_many([tmp_path])] == ["a", "b"]
    with pytest.raises(ScenarioError, match="nope: no such file or directory"):
        load_many([tmp_path / "nope"])


def test_load_many_names_every_bad_file_not_just_the_first(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('name = "a"\ndescription = "x"\nnodes = 2\ncolour = 1\n')
    (tmp_path / "b.toml").write_text('name = "b"\ndescription = "x"\nnodes = 2\n')
    (tmp_path / "c.toml").write_text('name = "c"\ndescription = "x"\nnodes = "two"\n')
    (tmp_path / "d.toml").write_text("name = \n")
    with pytest.raises(InvalidScenariosError, match=r"a\.toml: colour: unknown key") as info:
        load_many([tmp_path, tmp_path / "gone.toml"])
    bad = {Path(e.source).name: e.problems for e in info.value.errors}
    assert bad == {
        "gone.toml": ("no such file or directory",),
        "a.toml": ("colour: unknown key",),
        "c.toml": ("nodes: got 'two'; must be a whole number",),
        "d.toml": (bad["d.toml"][0],),
    }
    assert bad["d.toml"][0].startswith("not valid TOML")
    assert info.value.files == 4
    assert isinstance(info.value, ScenarioError)


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
    with pytest.raises(
        ScenarioError,
        match=r"expect\.outcome: got \[\]; an outcome list needs at least one outcome",
    ):
        scenario(expect={"outcome": []})


def test_a_bad_outcome_shows_the_value_and_the_allowed_outcomes() -> None:
    with pytest.raises(
        ScenarioError,
        match=r"test\.toml: expect\.outcome: got 'okk'; did you mean 'ok'\? allowed: 'ok', "
        r"'timeout', 'connection_error', .* or 'absent', or a list$",
    ):
        scenario(expect={"outcome": "okk"})


def test_a_bad_entry_of_an_outcome_list_is_named_by_its_index() -> None:
    with pytest.raises(
        ScenarioError,
        match=r"expect\.nodes\[0\]\.outcome\[1\]: got 'okk'; did you mean 'ok'\? allowed",
    ):
        scenario(expect={"nodes": [{"nodes": [1], "outcome": ["ok", "okk"]}]})


def test_a_value_no_member_of_a_union_accepts_lists_what_each_would_take() -> None:
    with pytest.raises(
        ScenarioError,
        match=r"fault\[0\]\.nodes: got 'some'; allowed: 'all' or 'others', or a list$",
    ):
        scenario(fault=[{"kind": "toxic", "type": "latency", "nodes": "some"}])
    with pytest.raises(
        ScenarioError,
        match=r"override\[0\]\.config\.a: got \[1\]; allowed: a string, a number or a boolean$",
    ):
        scenario(override=[{"nodes": [1], "config": {"a": [1]}}])


def test_validation_reports_every_problem_of_a_file_in_one_pass() -> None:
    found = problems(
        colour="red",
        timeouts={"join": -1},
        fault=[
            {"kind": "kill", "nodes": [9], "at": 1},
            {"kind": "toxic", "type": "latencyy"},
            {"kind": "link_down", "nodes": "all"},
        ],
        expect={"outcome": "okk", "nodes": [{"nodes": [7], "outcome": "ok"}]},
    )
    assert found[0] == "timeouts.join: got -1; must be greater than 0"
    assert found[1].startswith(
        "fault[1].type: got 'latencyy'; did you mean 'latency'? allowed: 'latency', "
    )
    assert found[2].startswith("expect.outcome: got 'okk'; did you mean 'ok'? allowed: 'ok', ")
    assert found[3:] == [
        "colour: unknown key",
        # the whole-scenario checks run on the parts that are valid on their own
        "fault[0].nodes: node 9 does not exist; the scenario has nodes 0..3",
        (
            "fault[2].nodes: got 'all', which includes node 0; node 0 hosts the store and "
            "reaches it without a link: target other nodes (the default 'others' does)"
        ),
        "expect.nodes[0].nodes: node 7 does not exist; the scenario has nodes 0..3",
    ]


BAD_VALUES: list[dict[str, Any]] = [
    {"expect": {"outcome": "okk"}},
    {"expect": {"outcome": ["ok", 3]}},
    {"expect": {"outcome": []}},
    {"nodes": "four"},
    {"nodes": 0},
    {"name": "Bad Name"},
    {"field_failure": "X1"},
    {"description": ""},
    {"seed": 1.5},
    {"timeouts": {"join": "x"}},
    {"endpoint": "x"},
    {"sources": ["ftp://x"]},
    {"backends": {"nope": {}}},
    {"backends": {"torch-static": {"violates": ["speed"]}}},
    {"fault": "x"},
    {"fault": [{"kind": "toxic", "type": "latency", "nodes": "some"}]},
    {"fault": [{"kind": "toxic", "type": "latency", "attributes": {"latency": "a"}}]},
    {"fault": [{"kind": "kill", "nodes": [1], "at": 1, "on": "joined"}]},
    {"fault": [{"kind": "squatter", "mode": "x"}, {"kind": "squatter", "mode": "http"}] * 2},
    {"override": [{"nodes": [1], "config": {"a": [1]}, "rank": -1}]},
]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=lambda bad: repr(bad)[:40])
def test_no_message_leaks_pydantic_vocabulary_and_each_names_its_key(bad: dict[str, Any]) -> None:
    found = problems(**bad)
    leaks = ("literal[", "tuple[", "list[", "Input should", "Value error", "top level", "[key]")
    for problem in found:
        assert not any(leak in problem for leak in leaks), problem
        key = problem.split(":", 1)[0]
        assert key and key.split(".")[0].split("[")[0] in {*bad, "fault"}, problem


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
    assert found.startswith("backends.nope: unknown backend 'nope'; allowed: 'static'")
    (found,) = problems(backends={"torch-static": {"violates": ["speed"]}})
    assert found.startswith("backends.torch-static.violates[0]: got 'speed'; allowed:")
    (found,) = problems(
        nodes=2, backends={"torch-static": {"expect": {"nodes": [{"nodes": [5], "outcome": "ok"}]}}}
    )
    where = "backends.torch-static.expect.nodes[0].nodes"
    assert found == f"{where}: node 5 does not exist; the scenario has nodes 0..1"


def test_switching_to_an_unknown_backend_names_the_scenario() -> None:
    with pytest.raises(ScenarioError, match="backend: unknown backend 'bogus'"):
        scenario().on_backend("bogus")


def test_a_store_fault_may_hit_any_op_every_time_and_bad_counts_are_named() -> None:
    fault = {"kind": "store_op", "op": "*", "action": "delay", "delay": 0.005}
    sc = scenario(fault=[{**fault, "count": "all"}])
    assert sc.fault[0].count == "all"
    assert problems(fault=[{**fault, "count": 0}]) == [
        "fault[0].count: got 0; allowed: 'all' or must be at least 1"
    ]
    assert problems(fault=[{**fault, "count": "many"}]) == [
        "fault[0].count: got 'many'; allowed: 'all' or a whole number"
    ]
