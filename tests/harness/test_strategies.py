"""The hypothesis strategies and the oracle, without running any node."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from harness.fuzz.oracle import allowed_for, expect_for, hard_deadline_for, summary
from harness.fuzz.ordered import dead_members
from harness.fuzz.strategies import (
    endpoints,
    fault_schedules,
    ordered_kill_schedules,
    scenarios,
    valid_endpoints,
)
from harness.report.fold import node_ranges
from harness.run.model import NodeOutcome
from harness.scenario.faults.fuzzing import Outline
from harness.scenario.faults.registry import FAULTS
from harness.scenario.load import parse
from harness.scenario.model import allowed_outcomes
from rdzv.endpoint import parse_rendezvous_endpoint
from rdzv.rendezvous._round_state import format_ranks

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The sentences every ValueError of the parser starts with (torch's wording).
PORT_RULE = "The port number of the rendezvous endpoint "
HOST_RULE = "The hostname of the rendezvous endpoint "


# --- endpoints ----------------------------------------------------------------------------


@FAST
@given(endpoints(), st.integers(-1, 70000))
def test_endpoint_parsing_returns_a_pair_or_raises_the_documented_value_error(
    text: str, default_port: int
) -> None:
    try:
        host, port = parse_rendezvous_endpoint(text, default_port)
    except ValueError as exc:
        assert str(exc).startswith((PORT_RULE, HOST_RULE)), str(exc)
        assert f"'{text.strip()}'" in str(exc)  # the message quotes the endpoint
    else:
        assert isinstance(host, str) and host
        assert port == default_port or 0 <= port <= 65535


@FAST
@given(valid_endpoints(), st.integers(0, 65535))
def test_valid_endpoints_round_trip_through_the_parser(
    endpoint: tuple[str, int | None, str], default_port: int
) -> None:
    host, port, text = endpoint
    expected = (host, default_port if port is None else port)
    assert parse_rendezvous_endpoint(text, default_port) == expected


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("h:65536", PORT_RULE),
        ("h:-1", PORT_RULE),
        ("::1", HOST_RULE),
        ("[h:1]", HOST_RULE),
        ("a..b:1", HOST_RULE),
    ],
)
def test_out_of_range_ports_and_bad_hosts_name_the_rule_that_failed(text: str, rule: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{rule}'{text}'")):
        parse_rendezvous_endpoint(text, 29400)


# --- scenarios ----------------------------------------------------------------------------


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios())
def test_every_generated_scenario_parses_and_survives_a_toml_round_trip(
    data: dict[str, Any],
) -> None:
    scenario = parse(data, "<generated>")
    assert tomllib.loads(tomli_w.dumps(data)) == data
    assert scenario.name.startswith("fuzz-") and scenario.seed == data["seed"]
    hard = scenario.timeouts.hard_deadline
    for node in range(scenario.nodes):
        want = scenario.expected(node)
        allowed = allowed_outcomes(want.outcome)
        assert "hung" not in allowed and "error" not in allowed
        if set(allowed) - {"ok", "absent"}:
            assert want.elapsed is not None and want.elapsed[1] < hard


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(2, 5).flatmap(lambda n: st.tuples(st.just(n), fault_schedules(n, 3.0))))
def test_fault_schedules_never_touch_node_0_s_link_or_an_absent_node(
    drawn: tuple[int, list[dict[str, Any]]],
) -> None:
    nodes, faults = drawn
    parse({"name": "x", "description": "x", "nodes": nodes, "fault": faults}, "<schedule>")
    absent = {n for f in faults if f["kind"] == "absent" for n in f["nodes"]}
    assert len(absent) < nodes
    for fault in faults:
        if fault["kind"] in ("kill", "pause", "restart", "late_start"):
            assert not absent & set(fault["nodes"])
        assert fault.get("on_node") not in absent


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios())
def test_the_oracle_never_allows_success_while_a_node_is_absent(data: dict[str, Any]) -> None:
    absent = {n for f in data["fault"] if f["kind"] == "absent" for n in f["nodes"]}
    for node, allowed in allowed_for(data).items():
        if absent:
            assert "ok" not in allowed
        if node in absent:
            assert allowed == ("absent",)


# --- the oracle on hand-written scenarios ---------------------------------------------------


def scenario(
    nodes: int, *faults: dict[str, Any], join: float = 3.0, **extra: Any
) -> dict[str, Any]:
    return {"nodes": nodes, "timeouts": {"join": join}, "fault": list(faults), **extra}


def entry_for(expect: dict[str, Any], node: int) -> dict[str, Any]:
    found: list[dict[str, Any]] = [e for e in expect["nodes"] if node in e["nodes"]]
    assert len(found) == 1, f"node {node} is in {len(found)} expect entries: {expect}"
    return found[0]


@FAST
@given(st.lists(st.integers(0, 40), min_size=1, unique=True))
def test_the_oracle_names_missing_ranks_as_rdzv_does(ranks: list[int]) -> None:
    assert node_ranges(ranks) == format_ranks(sorted(ranks))


def test_oracle_expects_timeouts_naming_the_missing_ranks_when_workers_never_arrive() -> None:
    expect = expect_for(scenario(5, {"kind": "absent", "nodes": [2, 3]}))
    for node in (0, 1, 4):
        entry = entry_for(expect, node)
        assert entry["outcome"] == "timeout"
        assert entry["message"] == r"missing ranks: 2-3\."
        assert entry["elapsed"] == [0.0, 21.0]
    assert entry_for(expect, 2)["outcome"] == "absent"


def test_oracle_expects_connection_errors_when_the_store_host_never_starts() -> None:
    expect = expect_for(scenario(3, {"kind": "absent", "nodes": [0]}, join=2.0))
    assert entry_for(expect, 0)["outcome"] == "absent"
    for node in (1, 2):
        assert entry_for(expect, node)["outcome"] == "connection_error"
        assert entry_for(expect, node)["message"] == "no rendezvous store answered"


def test_oracle_expects_state_errors_naming_the_rank_on_a_duplicate_claim() -> None:
    expect = expect_for(scenario(4, override=[{"nodes": [3], "rank": 1}]))
    assert {e["outcome"] for e in expect["nodes"]} == {"state_error"}
    assert entry_for(expect, 1)["message"] == "rank 1"
    assert entry_for(expect, 3)["message"] == "rank 1"
    assert "message" not in entry_for(expect, 0)


def test_oracle_expects_state_errors_naming_both_sizes_on_a_world_size_mismatch() -> None:
    expect = expect_for(scenario(4, override=[{"nodes": [2], "world_size": 6}]))
    for node in range(4):
        assert entry_for(expect, node)["outcome"] == "state_error"
        assert entry_for(expect, node)["message"] == "4.*6|6.*4"


def test_oracle_expects_success_under_latency_well_below_the_timeout() -> None:
    latency = {"kind": "toxic", "type": "latency", "attributes": {"latency": 40, "jitter": 10}}
    late = {"kind": "late_start", "nodes": [2], "delay": 0.5}
    expect = expect_for(scenario(3, latency, late))
    assert expect == {"outcome": "ok", "nodes": [{"nodes": [0, 1, 2], "outcome": "ok"}]}


def test_oracle_leaves_the_outcome_open_when_a_worker_is_killed_mid_join() -> None:
    kill = {"kind": "kill", "nodes": [2], "on": "connected", "on_node": 2}
    allowed = allowed_for(scenario(3, kill))
    assert allowed[2] == ("ok", "timeout", "connection_error", "killed")
    assert allowed[0] == ("ok", "timeout", "connection_error")


def test_oracle_counts_a_node_s_pauses_in_its_elapsed_bound() -> None:
    pause = {"kind": "pause", "nodes": [1], "on": "started", "on_node": 1, "duration": 4.0}
    data = scenario(2, pause, join=2.0)
    expect = expect_for(data)
    assert entry_for(expect, 1)["elapsed"] == [0.0, 23.0]
    assert entry_for(expect, 0)["elapsed"] == [0.0, 19.0]
    assert hard_deadline_for(data) > 23.0


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"kind": "late_start", "nodes": [1], "delay": 0.75}, True),
        ({"kind": "late_start", "nodes": [1], "delay": 0.8}, False),
        ({"kind": "toxic", "type": "latency", "attributes": {"latency": 3000}}, False),
        ({"kind": "toxic", "type": "reset_peer", "attributes": {"timeout": 0}}, False),
        ({"kind": "store_op", "op": "WAIT", "action": "delay", "delay": 0.3, "count": 2}, True),
        ({"kind": "store_op", "op": "ADD", "action": "fail"}, False),
    ],
)
def test_harmless_faults_are_those_their_kinds_call_well_inside_the_timeout(
    fault: dict[str, Any], expected: bool
) -> None:
    assert FAULTS.validate(fault).effect(Outline(count=3, join=3.0)).harmless is expected


@pytest.mark.parametrize(
    "name",
    [
        "F03-node-never-arrives",
        "F02-server-never-binds",
        "F25-duplicate-rank",
        "world-size-mismatch",
        "network-latency-under-timeout",
        "paused-node",
        "F16-store-host-crash",
        "fragmented-replies",
    ],
)
def test_the_oracle_allows_what_the_hand_written_scenarios_expect(name: str) -> None:
    with open(ROOT / "scenarios" / f"{name}.toml", "rb") as handle:
        data = tomllib.load(handle)
    written = parse(data, name)
    for node, allowed in allowed_for(data).items():
        assert set(allowed_outcomes(written.expected(node).outcome)) <= set(allowed), node


def test_scenarios_refuses_a_world_of_fewer_than_two_nodes() -> None:
    @given(scenarios(min_nodes=1))
    def draw(data: dict[str, Any]) -> None:
        raise AssertionError(f"drew {data}")

    with pytest.raises(ValueError, match=r"needs 2 <= min_nodes <= max_nodes.*got nodes 1\.\.5"):
        draw()


# --- ordered kills: a member dies before the round can complete ------------------------


def death_of(faults: list[dict[str, Any]]) -> dict[str, Any]:
    [death] = [f for f in faults if f["kind"] in ("kill", "restart")]
    return death


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.integers(3, 6).flatmap(
        lambda n: st.tuples(st.just(n), st.sampled_from([2.0, 3.5])).flatmap(
            lambda nj: st.tuples(st.just(nj), ordered_kill_schedules(*nj))
        )
    )
)
def test_ordered_kill_schedules_kill_a_worker_on_its_own_join_while_others_come_later(
    drawn: tuple[tuple[int, float], list[dict[str, Any]]],
) -> None:
    (nodes, join), faults = drawn
    parse({"name": "x", "description": "x", "nodes": nodes, "fault": faults}, "<schedule>")
    assert len(faults) <= 3
    death = death_of(faults)
    target = death["nodes"][0]
    assert target != 0 and death["on"] == "joined" and death["on_node"] == target
    assert 0 <= death["after"] <= 0.5
    later = {n for f in faults if f["kind"] in ("late_start", "absent") for n in f["nodes"]}
    assert later and not later & {0, target}
    for fault in faults:
        if fault["kind"] == "late_start":
            assert 0.2 <= fault["delay"] <= join


def test_ordered_kill_schedules_need_a_third_node() -> None:
    @given(ordered_kill_schedules(2, 3.0))
    def draw(faults: list[dict[str, Any]]) -> None:
        raise AssertionError(f"drew {faults}")

    with pytest.raises(ValueError, match="needs at least 3 nodes, got 2"):
        draw()


def is_ordered_kill(data: dict[str, Any], kind: str) -> bool:
    """A worker killed (or restarted) on its own join, other workers late or absent, node 0
    on time."""
    deaths = [f for f in data["fault"] if f["kind"] == kind and f.get("on") == "joined"]
    targets = {d["on_node"] for d in deaths if d["nodes"] == [d["on_node"]]} - {0}
    later = {n for f in data["fault"] if f["kind"] in ("late_start", "absent") for n in f["nodes"]}
    return bool(targets) and 0 not in later and bool(later - targets)


@pytest.mark.parametrize("kind", ["kill", "restart"])
def test_scenarios_draw_ordered_kills_and_their_restart_variant(kind: str) -> None:
    found = find(
        scenarios(),
        lambda data: is_ordered_kill(data, kind),
        settings=settings(database=None, max_examples=2000, deadline=None),
    )
    assert parse(found, "<found>").nodes >= 3


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(3, 5).flatmap(lambda n: ordered_kill_schedules(n, 3.0)), st.data())
def test_the_dead_member_rule_never_objects_when_the_kill_came_after_every_late_start(
    faults: list[dict[str, Any]], data: st.DataObject
) -> None:
    nodes = 1 + max(n for f in faults for n in f["nodes"])
    starts = {n: 0.0 for n in range(nodes)}
    for fault in faults:
        if fault["kind"] == "late_start":
            starts.update(dict.fromkeys(fault["nodes"], fault["delay"]))
    death = death_of(faults)
    target = death["nodes"][0]
    absent = {n for f in faults if f["kind"] == "absent" for n in f["nodes"]}
    kill_at = max(starts.values()) + data.draw(st.floats(0.01, 2.0))
    outcomes = [
        NodeOutcome(n, "absent")
        if n in absent
        else NodeOutcome(n, "killed", started=0.0, finished=kill_at)
        if n == target and death["kind"] == "kill"
        else NodeOutcome(n, "ok", rank=n, world_size=nodes, started=starts[n], finished=5.0)
        for n in range(nodes)
    ]
    scenario = {"nodes": nodes, "fault": faults}
    violations = dead_members(scenario, outcomes)
    if absent and death["kind"] == "kill":  # an absent node never starts: always after
        assert [v.check for v in violations] == ["dead_member"]
    else:  # the round may have completed before the kill, or the restart took over
        assert violations == []


def test_the_summary_line_shows_late_delays_and_what_a_kill_waits_for() -> None:
    faults = [
        {"kind": "late_start", "nodes": [2], "delay": 1.5},
        {"kind": "kill", "nodes": [1], "on": "joined", "on_node": 1, "after": 0.2},
        {
            "kind": "toxic",
            "type": "reset_peer",
            "attributes": {"timeout": 0},
            "at": 1,
            "duration": 2,
        },
    ]
    assert summary({"nodes": 3, "timeouts": {"join": 3.0}, "fault": faults}) == (
        "3 nodes, join 3 s, faults: late_start [2] delay 1.5, kill [1] on joined of 1 +0.2 s, "
        "toxic reset_peer at 1 s for 2 s attributes {timeout = 0}"
    )
