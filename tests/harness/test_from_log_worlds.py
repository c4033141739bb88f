"""Which world replays the network's causes: the netns world's kernel faults when the log
says the nodes ran in network namespaces of their own (or ``--world netns``), else the
local world's proxy links, with that assumption named. Conversions only: nothing runs."""

from __future__ import annotations

import pytest
from test_from_log_errors import NO_ROUTE, kinds, log, outcomes, scenario

from harness.logs import FromLogError, convert

NETNS_HOST = ("node-0.log", log("netns-host.log"))
NETNS_NO_ANSWER = ("node-1.log", log("netns-no-answer.log"))
NETNS_REFUSED = ("node-1.log", log("netns-refused.log"))


def test_a_netns_log_of_unanswered_connects_is_the_kernels_drop_of_the_syns() -> None:
    data, conversion = scenario(NETNS_HOST, NETNS_NO_ANSWER)
    assert data["world"] == "netns"
    (fault,) = data["fault"]
    assert (fault["kind"], fault["nodes"], fault["ports"]) == ("drop", [1], ["store"])
    assert outcomes(data) == {0: "timeout", 1: "connection_error"}
    summary = "\n".join(conversion.summary())
    assert "world: netns" in summary
    assert "network namespaces of their own (the netns world) (from node-0.log:1)" in summary


def test_a_netns_log_of_refused_connects_is_the_store_hosts_firewall_rejecting_them() -> None:
    data, _ = scenario(NETNS_HOST, NETNS_REFUSED)
    (fault,) = data["fault"]
    assert (fault["kind"], fault["answer"], fault["nodes"]) == ("reject", "reset", [1])
    assert data["world"] == "netns"


def test_world_local_replays_a_netns_logs_causes_with_proxy_links_and_says_so() -> None:
    conversion = convert([NETNS_HOST, NETNS_NO_ANSWER], name="t", world="local")
    assert 'world = "netns"' not in conversion.text
    assert [f.entry["kind"] for f in conversion.plan.faults] == ["toxic"]
    assumed = "\n".join(conversion.facts.assumptions)
    assert "--world local" in assumed and "node-0.log:1 says the nodes ran in namespaces" in assumed


def test_the_same_log_without_namespaces_is_a_black_hole_link_with_the_assumption_named() -> None:
    def no_placement(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if " started " not in line)

    logs = [(name, no_placement(text)) for name, text in (NETNS_HOST, NETNS_NO_ANSWER)]
    data, conversion = scenario(*logs)
    assert "world" not in data
    assert kinds(data) == ["toxic"] and data["fault"][0]["type"] == "timeout"
    summary = "\n".join(conversion.summary())
    assert "assumed: no line says the nodes ran in network namespaces" in summary
    assert "--world netns replays them with the kernel's drops and rejects" in summary


def test_no_route_without_a_word_of_namespaces_is_a_link_that_is_down_in_the_local_world() -> None:
    data, conversion = scenario(("w.log", NO_ROUTE))
    assert "world" not in data
    (fault,) = data["fault"]
    assert fault["kind"] == "link_down"
    assert outcomes(data)[fault["nodes"][0]] == "connection_error"
    assert any("'no route to host' is replayed as a link" in a for a in conversion.plan.assumptions)


def test_no_route_with_world_netns_is_the_kernels_host_unreachable() -> None:
    conversion = convert([("w.log", NO_ROUTE)], name="t", world="netns")
    (fault,) = conversion.plan.faults
    assert (fault.entry["kind"], fault.entry["answer"]) == ("reject", "unreachable")
    assert 'world = "netns"' in conversion.text
    assert any("as --world netns says" in a for a in conversion.facts.assumptions)


def test_a_port_held_by_another_process_leaves_the_netns_world_for_the_local_one() -> None:
    conversion = convert([("host.log", log("addr-in-use.log"))], name="t", world="netns")
    assert [f.entry["kind"] for f in conversion.plan.faults] == ["squatter"]
    assert 'world = "netns"' not in conversion.text
    assert any("no squatter in node 0's namespace" in a for a in conversion.plan.assumptions)


def test_a_world_from_log_does_not_write_for_is_an_error_naming_it() -> None:
    with pytest.raises(FromLogError, match="--world 'ray'"):
        convert([NETNS_HOST, NETNS_NO_ANSWER], world="ray")
