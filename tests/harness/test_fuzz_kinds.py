"""Fault kinds fuzz themselves: each kind draws its own tables and says what it may do to the
outcomes; the strategies and the oracle ask the registry and name no kind. A kind registered
from outside the package is drawn, judged and run with no change to ``harness/fuzz/``, and
each world draws exactly the kinds it can carry out."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from crash_kind import CrashFault
from hypothesis import HealthCheck, Phase, find, given, settings

from harness.fuzz.loop import fuzz
from harness.fuzz.oracle import allowed_for, expect_for, summary
from harness.fuzz.ordered import dead_members
from harness.fuzz.strategies import fault_schedules, scenarios
from harness.run.model import NodeOutcome, Report
from harness.run.suite import embedded_proxy, run_one
from harness.run.worlds import capabilities_of
from harness.scenario.faults.base import Context, Fault
from harness.scenario.faults.fuzzing import Outline
from harness.scenario.faults.registry import FAULTS
from harness.scenario.load import parse
from harness.scenario.model import Scenario
from harness.world.base import World

ROOT = Path(__file__).resolve().parents[2]
#: Settings of ``find``: the first example found, not shrunk (shrinking redraws hundreds).
FOUND = settings(
    database=None,
    max_examples=3000,
    deadline=None,
    derandomize=True,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)


class QuietFault(Fault):
    """A kind that does not say how to draw itself (nor what it does)."""

    kind: Literal["quiet"]

    def inject(self, world: World, ctx: Context) -> None:
        ctx.record([], "")


@pytest.fixture
def crash() -> Iterator[type[CrashFault]]:
    with FAULTS.registered(CrashFault) as kind:
        yield kind


def has_kind(kind: str) -> Any:
    return lambda faults: any(fault["kind"] == kind for fault in faults)


def drawable(world: str) -> list[str]:
    """The registered kinds that draw themselves and that ``world`` can carry out."""
    outline = Outline(4, 3.0, capabilities_of(world))
    found = []
    for name in FAULTS.kinds():
        kind = FAULTS.get(name)
        if (
            kind is not None
            and kind.needs <= outline.capabilities
            and kind.draw(outline) is not None
        ):
            found.append(name)
    return sorted(found)


# --- a kind from outside the package ------------------------------------------------------


def test_a_kind_registered_from_outside_is_drawn_by_the_strategies(
    crash: type[CrashFault],
) -> None:
    faults = find(fault_schedules(3, 2.0), has_kind("crash"), settings=FOUND)
    [table] = [f for f in faults if f["kind"] == "crash"]
    assert table["node"] in range(3) and table["reason"] in ("disk on fire", "cosmic ray")
    parse({"name": "x", "description": "x", "nodes": 3, "fault": faults}, "<drawn>")


def test_the_oracle_judges_a_registered_kind_by_what_the_kind_says_it_does(
    crash: type[CrashFault],
) -> None:
    data = {
        "nodes": 3,
        "timeouts": {"join": 2.0},
        "fault": [
            {"kind": "crash", "node": 2, "reason": "cosmic ray", "on": "joined", "on_node": 2}
        ],
    }
    assert allowed_for(data) == {
        0: ("ok", "timeout", "connection_error"),
        1: ("ok", "timeout", "connection_error"),
        2: ("ok", "timeout", "connection_error", "killed"),
    }
    [crashed] = [e for e in expect_for(data)["nodes"] if 2 in e["nodes"]]
    assert crashed["outcome"] == ["ok", "timeout", "connection_error", "killed"]
    assert summary(data) == (
        "3 nodes, join 2 s, faults: crash on joined of 2 +0 s node 2 reason cosmic ray"
    )
    # the order rule judges its kills too: node 2 dead before absent node 1 could start
    absent = {"kind": "absent", "nodes": [1]}
    outcomes = [
        NodeOutcome(0, "ok", rank=0, world_size=3, started=0.0, finished=3.0),
        NodeOutcome(1, "absent"),
        NodeOutcome(2, "killed", started=0.0, finished=0.4),
    ]
    [violation] = dead_members({**data, "fault": [*data["fault"], absent]}, outcomes)
    assert violation.check == "dead_member" and violation.nodes == (0,)


def test_a_drawn_scenario_with_a_registered_kind_runs_and_meets_the_oracle_on_real_nodes(
    crash: type[CrashFault],
) -> None:
    data = find(
        scenarios(max_nodes=3, max_join=2.0, max_faults=1),
        lambda found: has_kind("crash")(found["fault"]),
        settings=FOUND,
    )
    report = run_one(parse(data, "<drawn>"), embedded_proxy, data["seed"])
    assert report.error is None, report.error
    assert report.problems == [], [f"{v.check}: {v.message}" for v in report.problems]
    [record] = report.faults
    assert record.kind == "crash"


def test_a_kind_that_does_not_say_how_to_draw_itself_is_never_drawn() -> None:
    with FAULTS.registered(QuietFault):
        assert "quiet" not in drawable("local")

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
        @given(fault_schedules(4, 3.0))
        def never(faults: list[dict[str, Any]]) -> None:
            assert not has_kind("quiet")(faults)

        never()
        # the oracle leaves a fault that says nothing open: anything but success is fine
        data = {"nodes": 2, "timeouts": {"join": 2.0}, "fault": [{"kind": "quiet"}]}
        assert allowed_for(data) == {n: ("ok", "timeout", "connection_error") for n in (0, 1)}


# --- each world draws the kinds it can carry out ------------------------------------------


def test_the_netns_world_draws_its_kernel_faults_and_the_local_world_its_proxy_faults() -> None:
    kernel = ["bandwidth", "drop", "filter", "loss", "partition", "reject"]
    local = drawable("local")
    assert local == [
        "absent",
        "kill",
        "late_start",
        "link_down",
        "pause",
        "restart",
        "store_op",
        "toxic",
    ]
    assert drawable("netns") == sorted([*local, *kernel])  # its proxy links carry toxics too


@pytest.mark.parametrize(
    ("world", "kind"), [(w, k) for w in ("local", "netns") for k in drawable(w)]
)
def test_every_kind_a_world_can_carry_out_is_drawn_there(world: str, kind: str) -> None:
    faults = find(fault_schedules(4, 3.0, world=world), has_kind(kind), settings=FOUND)
    parse({"name": "x", "description": "x", "nodes": 4, "world": world, "fault": faults}, "<d>")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios(world="netns"))
def test_netns_scenarios_run_in_the_netns_world_with_faults_it_can_carry_out(
    data: dict[str, Any],
) -> None:
    scenario = parse(data, "<generated>")
    assert scenario.world == "netns"
    for fault in scenario.fault:
        assert fault.needs <= capabilities_of("netns"), fault.kind


def test_fuzz_in_the_netns_world_gives_every_scenario_that_world(tmp_path: Path) -> None:
    seen: list[Scenario] = []

    def record(scenario: Scenario, seed: int) -> Report:
        seen.append(scenario)
        return Report(scenario, seed, outcomes=[])

    result = fuzz(20, 3, tmp_path, lambda line: None, world="netns", runner=record)
    assert result.examples == len(seen) > 0
    assert {s.world for s in seen} == {"netns"}


def test_fuzz_stops_and_says_why_when_the_world_cannot_run_here(tmp_path: Path) -> None:
    calls: list[str] = []

    def unavailable(scenario: Scenario, seed: int) -> Report:
        calls.append(scenario.name)
        return Report(scenario, seed, outcomes=[], skipped="the netns world needs root")

    lines: list[str] = []
    result = fuzz(10, 3, tmp_path, lines.append, world="netns", runner=unavailable)
    assert (result.examples, result.skipped, len(calls)) == (0, "the netns world needs root", 1)
    assert lines[0].startswith("[skipped] fuzz-")
    assert lines[-1] == "fuzz: seed 3: nothing ran: the netns world needs root"


def test_fuzz_refuses_a_world_whose_capabilities_it_does_not_know(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no capabilities known for the 'mars' world"):
        fuzz(1, 1, tmp_path, lambda line: None, world="mars")


# --- hypothesis stays the fuzzer's ------------------------------------------------------


def test_loading_scenarios_does_not_import_hypothesis() -> None:
    code = (
        "import sys; from harness.scenario.load import load; "
        "load(sys.argv[1]); print('hypothesis' in sys.modules)"
    )
    path = ROOT / "scenarios" / "netns" / "N01-filtered-store-port.toml"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# --- --kinds: a fuzz session limited to some kinds ----------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenarios(kinds=frozenset({"kill", "toxic"})))
def test_a_session_limited_to_some_kinds_draws_no_other_kind_and_no_misconfigured_node(
    data: dict[str, Any],
) -> None:
    assert {fault["kind"] for fault in data["fault"]} <= {"kill", "toxic"}
    assert "override" not in data
    parse(data, "<generated>")


def test_a_session_limited_to_one_kind_still_draws_it() -> None:
    found = find(scenarios(kinds=frozenset({"store_op"})), lambda d: bool(d["fault"]))
    assert {fault["kind"] for fault in found["fault"]} == {"store_op"}


def test_fuzz_with_kinds_gives_only_those_kinds_to_the_runner(tmp_path: Path) -> None:
    seen: list[Scenario] = []

    def record(scenario: Scenario, seed: int) -> Report:
        seen.append(scenario)
        return Report(scenario, seed, outcomes=[])

    fuzz(30, 5, tmp_path, lambda line: None, runner=record, kinds=["absent", "pause"])
    drawn = {fault.kind for scenario in seen for fault in scenario.fault}
    assert drawn and drawn <= {"absent", "pause"}


@pytest.mark.parametrize(
    ("world", "kinds", "complaint"),
    [
        ("local", ["drop"], "the local world cannot carry out drop (needs "),
        ("local", ["nonesuch"], "unknown fault kind(s) nonesuch; the kinds are: absent,"),
        ("local", [], "no fault kind"),
    ],
)
def test_fuzz_refuses_kinds_it_cannot_draw_in_the_world(
    tmp_path: Path, world: str, kinds: list[str], complaint: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(complaint)):
        fuzz(1, 1, tmp_path, lambda line: None, world=world, kinds=kinds)
