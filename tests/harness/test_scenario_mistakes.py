"""Mistakes a new user made that the loader accepted, or reported one at a time, or without
a key path or a suggestion (issue 25's papercuts)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.errors import ScenarioError
from harness.scenario.load import parse

BASE: dict[str, Any] = {"name": "s", "description": "d", "nodes": 4}


def problems(**extra: Any) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse({**BASE, **extra}, "test.toml")
    return list(info.value.problems)


def toxic(kind: str, **attributes: int) -> dict[str, Any]:
    return {"kind": "toxic", "type": kind, "attributes": attributes}


def test_a_negative_toxic_attribute_is_rejected_with_its_key_path() -> None:
    found = problems(fault=[toxic("latency", latency=-500), toxic("bandwidth", rate=-1)])
    assert found == [
        "fault[0].attributes.latency: got -500; must be at least 0",
        "fault[1].attributes.rate: got -1; must be at least 0",
    ]
    assert parse({**BASE, "fault": [toxic("timeout", timeout=0)]}, "t.toml").fault


@pytest.mark.parametrize("hard", [3, 10])
def test_a_hard_deadline_not_after_the_join_timeout_is_rejected(hard: float) -> None:
    (problem,) = problems(timeouts={"join": 10, "hard": hard})
    assert problem == (
        f"timeouts.hard: the hard deadline ({hard} s) must be greater than timeouts.join "
        "(10 s): a node still waiting for its join timeout would be killed and reported "
        "hung; raise hard or leave it out (2 x join + 15)"
    )


def test_a_nodes_own_timeout_reaching_the_hard_deadline_is_rejected() -> None:
    late = [{"nodes": [1], "config": {"timeout": 30}}]
    (problem,) = problems(timeouts={"join": 5}, override=late)
    assert problem == (
        "override[0].config.timeout: got 30; the hard deadline (25 s, 2 x timeouts.join + 15) "
        "must be greater, or its nodes are killed and reported hung before they time out; "
        "raise timeouts.hard"
    )
    (problem,) = problems(timeouts={"join": 5, "hard": 20}, override=late)
    assert problem.startswith("override[0].config.timeout: got 30; the hard deadline (20 s, ")
    parse({**BASE, "timeouts": {"join": 5, "hard": 31}, "override": late}, "t.toml")


def test_an_entry_invalid_for_another_reason_still_has_its_nodes_checked() -> None:
    found = problems(
        fault=[{"kind": "toxic", "type": "latency", "latency": 100, "nodes": [9]}],
        override=[{"nodes": [5], "bogus": 1}],
        expect={"nodes": [{"nodes": [7], "outcome": "ok", "colour": 1}]},
    )
    assert set(found) == {
        (
            "fault[0].latency: unknown key; a latency toxic's 'latency' goes in its "
            "attributes: attributes = { latency = ... }"
        ),
        "override[0].bogus: unknown key",
        "expect.nodes[0].colour: unknown key",
        "fault[0].nodes: node 9 does not exist; the scenario has nodes 0..3",
        "override[0].nodes: node 5 does not exist; the scenario has nodes 0..3",
        "expect.nodes[0].nodes: node 7 does not exist; the scenario has nodes 0..3",
    }


def test_a_misspelt_kind_type_or_outcome_gets_a_suggestion() -> None:
    found = problems(
        fault=[{"kind": "filtr", "ports": [1]}, {"kind": "toxic", "type": "latncy"}],
        expect={"outcome": "timout"},
    )
    assert found[0].startswith("fault[0].kind: got 'filtr'; did you mean 'filter'? allowed: ")
    assert found[1].startswith("fault[1].type: got 'latncy'; did you mean 'latency'? allowed: ")
    assert found[2].startswith("expect.outcome: got 'timout'; did you mean 'timeout'? allowed: ")
    (far,) = problems(fault=[{"kind": "meteor"}])
    assert far.startswith("fault[0].kind: got 'meteor'; allowed: 'toxic', ")


def test_a_bad_port_names_its_key_path() -> None:
    found = problems(
        fault=[{"kind": "drop", "ports": ["store", 70000]}, {"kind": "filter", "ports": [0]}]
    )
    assert found == [
        "fault[0].ports[1]: a port is 'store' or a number from 1 to 65535, got 70000",
        "fault[1].ports[0]: a port is 'store' or a number from 1 to 65535, got 0",
    ]
