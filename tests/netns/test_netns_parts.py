"""The netns world's parts that need no namespace: names, nft rule text, fault-kind keys,
and what a world without the kernel's faults says."""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.errors import ScenarioError
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse
from harness.world.base import PacketRule
from harness.world.netns import naming, shell
from harness.world.netns.rules import match_text


def _scenario(**fields: Any) -> Any:
    return parse({"name": "netns-parts", "description": "a test", **fields}, "<test>")


def test_node_addresses_come_from_the_benchmarking_network() -> None:
    assert naming.node_address(0) == "198.18.0.10"
    assert naming.node_address(1023) == "198.18.4.9"
    with pytest.raises(ValueError, match="does not fit"):
        naming.node_address(70_000)


def test_namespace_names_carry_the_harness_pid_and_the_run() -> None:
    run = naming.run_id("my-scenario-0123abcd")
    assert len(run) == 8
    assert naming.namespace(run, "n3") == f"harness-{os.getpid()}-{run}-n3"


def test_a_partition_rule_matches_by_source_and_destination_address() -> None:
    rule = PacketRule(sources=(1,), destinations=(0, 2))
    assert match_text(rule, naming.node_address, 4) == (
        "ip saddr { 198.18.0.11 } ip daddr { 198.18.0.10, 198.18.0.12 }"
    )


def test_a_side_with_every_node_needs_no_address_match() -> None:
    rule = PacketRule(sources=(0, 1), destinations=(0, 1), percent=2.5)
    assert match_text(rule, naming.node_address, 2) == "numgen random mod 10000 < 250"


def test_a_syn_drop_to_a_port_matches_only_connection_attempts() -> None:
    rule = PacketRule(sources=(1,), destinations=(0,), ports=(29500,), syn_only=True)
    assert match_text(rule, naming.node_address, 2).endswith(
        "tcp dport { 29500 } tcp flags & (syn | ack) == syn"
    )


def test_a_reset_without_ports_still_matches_tcp_only() -> None:
    rule = PacketRule(sources=(1,), destinations=(0,), verdict="reject-reset")
    assert "meta l4proto tcp" in match_text(rule, naming.node_address, 3)


def test_a_filter_keeps_the_listed_ports_open() -> None:
    rule = PacketRule(sources=(0, 1), destinations=(0,), except_ports=(29500, 22), syn_only=True)
    assert "tcp dport != { 22, 29500 }" in match_text(rule, naming.node_address, 2)


def test_a_partition_with_a_node_on_both_sides_is_invalid() -> None:
    with pytest.raises(ScenarioError, match=r"node\(s\) \[1\] are on both sides"):
        _scenario(nodes=3, fault=[{"kind": "partition", "nodes": [1], "others": [1, 2]}])


def test_a_port_out_of_range_is_invalid() -> None:
    with pytest.raises(ScenarioError, match="a port is 'store' or a number from 1 to 65535"):
        _scenario(nodes=2, fault=[{"kind": "drop", "ports": [70000]}])


def test_loss_needs_a_percentage_above_zero() -> None:
    with pytest.raises(ScenarioError, match="percent"):
        _scenario(nodes=2, fault=[{"kind": "loss", "percent": 0}])


def test_an_unknown_world_is_invalid() -> None:
    with pytest.raises(ScenarioError, match="world"):
        _scenario(nodes=2, world="moon")


@pytest.mark.parametrize(
    ("fault", "what"),
    [
        ({"kind": "drop"}, "drop, reject or lose packets"),
        ({"kind": "partition", "nodes": [1]}, "drop, reject or lose packets"),
        ({"kind": "bandwidth", "rate_kbit": 64}, "limit a node's bandwidth"),
    ],
)
def test_the_local_world_reports_kernel_faults_unsupported_with_the_reason(
    fault: dict[str, Any], what: str
) -> None:
    report = run_one(_scenario(nodes=2, fault=[fault]), embedded_proxy, 1)
    assert report.skipped is not None
    assert f"the local world cannot {what}" in report.skipped
    assert "netns" in report.skipped


def test_the_netns_world_reports_a_squatter_unsupported_naming_the_world() -> None:
    scenario = _scenario(nodes=2, world="netns", fault=[{"kind": "squatter", "mode": "silent"}])
    report = run_one(scenario, embedded_proxy, 1)
    assert report.skipped is not None
    assert "the netns world cannot hold the store's port with a squatter" in report.skipped
    assert "the local world can" in report.skipped
    assert report.skip_reason == f"not run: {report.skipped}"


def test_a_machine_without_root_skips_the_netns_world_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shell.why_not.cache_clear()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    try:
        report = run_one(_scenario(nodes=2, world="netns"), embedded_proxy, 1)
    finally:
        monkeypatch.undo()
        shell.why_not.cache_clear()
    assert (
        report.skipped == "the netns world needs root (network namespaces, nftables); run as root"
    )
