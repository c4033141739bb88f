"""A fault kind is one class: registered from outside the package, it is part of the format
(validated, explained, checked against the whole file) and runs on real nodes through the
world's verbs, reporting what it did -- with no change to the runner or the loader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from crash_kind import CrashFault

from harness.errors import ScenarioError
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.faults.base import Context, Fault
from harness.scenario.faults.registry import FAULTS
from harness.scenario.load import load, parse
from harness.world.base import World


class TeleportFault(Fault):
    """A kind that needs something no world offers."""

    kind: Literal["teleport"]
    needs: ClassVar[frozenset[str]] = frozenset({"teleport"})

    def inject(self, world: World, ctx: Context) -> None:
        raise AssertionError("a world without 'teleport' must never run this")


@pytest.fixture
def crash() -> Iterator[type[CrashFault]]:
    with FAULTS.registered(CrashFault) as kind:
        yield kind
    assert "crash" not in FAULTS.kinds()


SCENARIO = """
name = "crash-store-host"
description = "A fault kind of the test's own crashes node 0 once node 1 has joined."
seed = 1101
nodes = 3

[timeouts]
join = 3

[[fault]]
kind = "late_start"
nodes = [2]
delay = 1

[[fault]]
kind = "crash"
node = 0
reason = "disk on fire"
on = "joined"
on_node = 1

[expect]
outcome = "connection_error"

[[expect.nodes]]
nodes = [0]
outcome = "killed"
message = "^crashed: disk on fire$"
"""

BASE = {"name": "s", "description": "d", "nodes": 3}


def problems(*faults: dict[str, object]) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse({**BASE, "fault": list(faults)}, "t.toml")
    return list(info.value.problems)


def test_a_kind_registered_from_outside_runs_from_a_scenario_file_on_real_nodes(
    crash: type[CrashFault], tmp_path: Path
) -> None:
    path = tmp_path / "crash.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    scenario = load(path)
    assert isinstance(scenario.fault[1], crash)
    assert scenario.fault[1].label == "crash"

    report = run_one(scenario, embedded_proxy, 1101)

    assert report.passed, report.problems or report.error
    store_host = report.outcomes[0]
    assert (store_host.status, store_host.message) == ("killed", "crashed: disk on fire")
    record = report.faults[1]
    assert (record.index, record.kind, record.nodes, record.detail) == (
        1,
        "crash",
        [0],
        "disk on fire",
    )
    assert record.acted == {"nodes crashed": 1}
    assert record.effects == "1 node crashed"
    (joined,) = [e for e in report.outcomes[1].events if e.event == "joined"]
    assert record.end == record.start >= joined.t


def test_a_registered_kind_is_validated_and_explained_like_a_built_in_one(
    crash: type[CrashFault],
) -> None:
    assert problems({"kind": "crash", "reason": "", "colour": "red", "at": 1}) == [
        "fault[0].node: required key is missing",
        "fault[0].reason: got ''; must not be empty",
        "fault[0].colour: unknown key",
    ]
    assert problems({"kind": "crash", "node": 7, "reason": "r", "at": 1}) == [
        "fault[0].node: there is no node 7"
    ]
    (unknown,) = problems({"kind": "meteor"})
    assert unknown.startswith("fault[0].kind: got 'meteor'; allowed: 'toxic', ")
    assert unknown.endswith("'filter', 'bandwidth', 'crash'")


def test_an_unregistered_kind_is_unknown_again(crash: type[CrashFault]) -> None:
    FAULTS.unregister(crash)
    try:
        (problem,) = problems({"kind": "crash", "node": 1, "reason": "r"})
        assert problem.startswith("fault[0].kind: got 'crash'; allowed: 'toxic', ")
    finally:
        FAULTS.register(crash)


def test_a_kind_the_world_cannot_carry_out_is_reported_unsupported_and_nothing_runs() -> None:
    with FAULTS.registered(TeleportFault):
        scenario = parse({**BASE, "fault": [{"kind": "teleport"}]}, "t.toml")
        report = run_one(scenario, embedded_proxy, 1)
    assert report.outcomes == []
    assert report.skipped == ("the local world cannot do 'teleport': fault[0] is a teleport fault")


def test_a_kind_is_registered_once_and_only_with_a_literal_kind(
    crash: type[CrashFault],
) -> None:
    with pytest.raises(ValueError, match=r"fault kind 'crash' is registered already \(by Crash"):
        FAULTS.register(crash)

    class Loose(Fault):
        pass

    with pytest.raises(TypeError, match=r"Loose\.kind must be a Literal of the kind's name"):
        FAULTS.register(Loose)
    with pytest.raises(KeyError, match="TeleportFault is not a registered fault kind"):
        FAULTS.unregister(TeleportFault)
