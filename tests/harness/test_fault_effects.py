"""Whether each fault acted: what each carrier counts, and what a run records.

The proxy's event log tells what a toxic or a disabled link did; the store-fault rules, the
squatters and the DNS shim count their own effects; the runner counts signals and starts.
"""

from __future__ import annotations

import multiprocessing
import re
import socket
import threading
from typing import Any

import pytest
from proxy_helpers import UpstreamServer, connect, recv_exactly, recv_until_closed

from harness.errors import HarnessError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.proxy.events import link_cuts, toxic_effects
from harness.run.model import FaultRecord
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse
from harness.scenario.model import Scenario
from harness.world.process.dns import DnsShim, EndpointName, install_dns_shim, names_down
from harness.world.proxied.squatters import HTTP_REPLY, Squatter
from harness.world.proxied.store_faults import matches
from harness.world.specs import StoreRule
from rdzv.store.wire import _wire

# --- the record -------------------------------------------------------------------------


def test_a_fault_says_what_it_did_in_words_singular_and_plural() -> None:
    fault = FaultRecord(0, "toxic", [1], 0.0, acted={})
    fault.count("connections reset", 2)
    fault.count("WAIT requests held")
    fault.count("nodes paused")
    fault.count("lookups failed", 0)
    assert fault.effects == "2 connections reset, 1 WAIT request held, 1 node paused"
    assert not fault.idle


def test_a_counted_fault_that_did_nothing_is_idle_and_an_uncounted_one_is_not() -> None:
    idle = FaultRecord(1, "toxic", [1], 0.0, acted={}, note="in place on 2 connections")
    assert idle.idle
    assert idle.effects == "did not act (in place on 2 connections)"
    unknown = FaultRecord(2, "toxic", [1], 0.0)
    unknown.not_counted("not counted: the proxy keeps no event log")
    assert not unknown.idle
    assert unknown.effects == "not counted: the proxy keeps no event log"


def test_a_fault_an_interrupted_run_never_let_act_is_not_reached_rather_than_idle() -> None:
    cut = FaultRecord(3, "toxic", [1], 0.0, acted={}, note="in place on 2 connections")
    cut.reached = False
    assert not cut.idle  # no "did not act" warning: it never had the chance
    assert cut.effects == "not reached: the run was interrupted before it acted"


# --- reading the proxy's event log (pure) -----------------------------------------------


def event(seq: int, proxy: str, connection: int, toxic: str, action: str, detail: str = "") -> Any:
    return {
        "seq": seq,
        "proxy": proxy,
        "connection": connection,
        "toxic": toxic,
        "action": action,
        "detail": detail,
    }


def test_toxic_effects_count_each_connection_once_and_ignore_other_toxics() -> None:
    events = [
        event(1, "p1", 1, "f0-timeout", "applied"),
        event(2, "p1", 1, "f0-timeout", "acted", "dropping data"),
        event(3, "p1", 1, "f0-timeout", "acted", "closed after 100 ms without data"),
        event(4, "p1", 1, "f0-timeout", "closed", "close by toxic f0-timeout"),
        event(5, "p2", 1, "f0-timeout", "applied"),
        event(6, "p2", 1, "f1-latency", "acted", "delaying data by 5 ms"),
        event(7, "p2", 2, "f0-timeout", "skipped"),
    ]
    found = toxic_effects(events, "f0-timeout", "timeout")
    assert found.effects == {"connections black-holed": 1, "connections closed": 1}
    assert (found.applied, found.skipped) == (2, 1)


def test_link_cuts_give_each_disabling_the_connections_it_closed() -> None:
    events = [
        event(1, "p1", 1, "", "closed", "proxy disabled"),
        event(2, "p1", 2, "", "closed", "proxy disabled"),
        event(3, "p2", 1, "", "closed", "proxy disabled"),
        event(4, "p1", 0, "", "disabled"),
        event(5, "p1", 0, "", "enabled"),
        event(6, "p1", 3, "", "closed", "socket closed"),
        event(7, "p1", 0, "", "disabled"),
    ]
    assert link_cuts(events, "p1") == [2, 0]
    assert link_cuts(events, "p3") == []


# --- the embedded proxy's log -----------------------------------------------------------


def echoed(sock: socket.socket, data: bytes) -> None:
    sock.sendall(data)
    assert recv_exactly(sock, len(data)) == data


def test_the_log_shows_a_latency_toxic_delaying_a_connection(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("slow", upstream.address)
    client.add_toxic("slow", "latency", name="f0-latency", attributes={"latency": 1})
    with connect(proxy.listen_address) as sock:
        echoed(sock, b"ping")
    found = toxic_effects(client.events(proxy="slow"), "f0-latency", "latency")
    assert found == ({"connections delayed": 1}, 1, 0)


def test_the_log_shows_a_reset_peer_toxic_resetting_a_connection(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("rst", upstream.address)
    client.add_toxic("rst", "reset_peer", name="f0-reset_peer", stream="upstream")
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"boom")
        with pytest.raises(ConnectionResetError):
            recv_until_closed(sock)
    found = toxic_effects(client.events(proxy="rst"), "f0-reset_peer", "reset_peer")
    assert found.effects == {"connections reset": 1}


def test_a_reset_peer_window_behind_a_latency_toxic_acts_on_nothing(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("behind", upstream.address)
    with connect(proxy.listen_address) as sock:
        echoed(sock, b"up")  # the connection exists before the toxics arrive
        client.add_toxic(
            "behind", "latency", name="f0-latency", stream="upstream",
            attributes={"latency": 600_000},
        )  # fmt: skip
        client.add_toxic("behind", "reset_peer", name="f1-reset_peer", stream="upstream")
        sock.sendall(b"held by the latency toxic")
        client.remove_toxic("behind", "f1-reset_peer")
        client.delete_proxy("behind")
    found = toxic_effects(client.events(proxy="behind"), "f1-reset_peer", "reset_peer")
    assert found == ({}, 1, 0)


def test_disabling_a_link_is_logged_with_the_connections_it_cut(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("cut", upstream.address)
    with connect(proxy.listen_address) as one, connect(proxy.listen_address) as two:
        echoed(one, b"1")
        echoed(two, b"2")
        client.disable("cut")
    client.enable("cut")
    client.disable("cut")
    assert link_cuts(client.events(proxy="cut"), "cut") == [2, 0]


# --- carriers that count their own effects ----------------------------------------------


def test_a_store_rule_counts_each_firing_as_what_its_action_did() -> None:
    rule = StoreRule("WAIT", "*/complete", "delay", delay=1.0, count=2)
    assert rule.acted == {}
    rule.fired = 2
    assert rule.acted == {"WAIT requests held": 2}
    dropped = StoreRule("ADD", "*", "drop", fired=1)
    assert dropped.acted == {"ADD requests dropped": 1}


def test_a_store_rule_for_any_op_matches_every_operation_on_its_keys_and_nodes() -> None:
    rule = StoreRule("*", "__rdzv__/*", "delay", delay=0.005, count=3, nodes=frozenset({1}))
    add, wait = _wire.Add(b"/__rdzv__/count", 1), _wire.Wait([b"/__rdzv__/done"])
    assert matches(rule, 1, add) and matches(rule, 1, wait)
    assert not matches(rule, 2, add)  # another node's request
    assert not matches(rule, 1, _wire.Get(b"/harness/rank/1"))  # another key
    rule.fired = 2
    assert rule.acted == {"requests held": 2}
    rule.fired = 3
    assert not matches(rule, 1, add)  # its count is spent


def test_an_http_squatter_counts_the_connections_it_answered() -> None:
    squatter = Squatter("http")
    try:
        with socket.create_connection(("127.0.0.1", squatter.port), timeout=10) as sock:
            assert recv_until_closed(sock) == HTTP_REPLY
    finally:
        squatter.release()
    assert squatter.acted == {"connections answered with HTTP 400": 1}


def test_a_port_holding_squatter_counts_the_connections_left_in_its_backlog() -> None:
    squatter = Squatter("loopback")
    try:
        with socket.create_connection(("127.0.0.1", squatter.port), timeout=10):
            assert squatter.acted == {}
            squatter.release()
    finally:
        squatter.release()
    assert squatter.acted == {"connections left unaccepted in the backlog": 1}


def test_the_dns_shim_counts_each_lookup_it_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)  # restored afterwards
    up = threading.Event()
    failures = [0, 0]
    install_dns_shim(DnsShim("store.rdzv.test", "127.0.0.1", up, failures, slot=1))
    with pytest.raises(socket.gaierror, match=r"Name or service not known \(harness\)"):
        socket.getaddrinfo("store.rdzv.test", 80)
    up.set()
    assert socket.getaddrinfo("store.rdzv.test", 80, socket.AF_INET)[0][4][0] == "127.0.0.1"
    assert failures == [0, 1]


def test_names_down_counts_only_the_lookups_failed_since_it_went_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", socket.getaddrinfo)  # restored afterwards
    name = EndpointName(multiprocessing.get_context("spawn"), "store.rdzv.test", "127.0.0.1", 2)
    install_dns_shim(name.shim(1))
    first = names_down(name, "store.rdzv.test")
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("store.rdzv.test", 80)
    first.up()
    assert socket.getaddrinfo("store.rdzv.test", 80, socket.AF_INET)[0][4][0] == "127.0.0.1"
    second = names_down(name, "store.rdzv.test")
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("store.rdzv.test", 80)
    assert (first.failed(), second.failed(), list(name.failures)) == (2, 1, [0, 2])
    with pytest.raises(HarnessError, match=r"'127\.0\.0\.1' is an IP address.*host name"):
        names_down(None, "127.0.0.1")


# --- a whole run ------------------------------------------------------------------------


def test_a_run_records_a_reset_peer_window_behind_latency_as_not_acting() -> None:
    scenario = parse(
        {
            "name": "reset-behind-latency",
            "description": "A reset_peer window that only sees data held by latency.",
            "nodes": 3,
            "timeouts": {"join": 20},
            "fault": [
                {
                    "kind": "toxic", "nodes": [1], "type": "latency", "stream": "upstream",
                    "attributes": {"latency": 60_000}, "at": 0, "duration": 2,
                },
                {
                    "kind": "toxic", "nodes": [1], "type": "reset_peer", "stream": "upstream",
                    "attributes": {"timeout": 0}, "at": 0, "duration": 1,
                },
                {"kind": "late_start", "nodes": [2], "delay": 0.5},
            ],
        },
        "<test>",
    )  # fmt: skip
    report = run_one(scenario, embedded_proxy, 7)
    assert report.passed, report.problems or report.error
    latency, reset, late = report.faults
    assert latency.acted is not None and latency.acted.get("connections delayed", 0) >= 1
    assert reset.idle
    assert re.fullmatch(r"in place on \d+ connections?, but no data reached it there", reset.note)
    assert report.unexpectedly_idle == [reset]
    assert (late.kind, late.start, late.end) == ("late_start", 0.0, 0.5)
    assert late.acted == {"nodes started late": 1}


def test_a_link_down_whose_refusals_the_backend_cannot_report_is_not_counted_not_idle() -> None:
    # The nodes never dial, so nothing is cut; whether connections would have been refused
    # is unknowable without the nodes' connect events: "not counted", never "did not act".
    scenario = parse(
        {
            "name": "link-down-unseen",
            "description": "A link goes down under nodes whose backend reports no connects.",
            "nodes": 3,
            "backend": "fake_backends:offline",
            "timeouts": {"join": 1},
            "fault": [{"kind": "link_down", "nodes": [1, 2], "at": 0, "duration": 0.5}],
        },
        "<test>",
    )
    report = run_one(scenario, embedded_proxy, 5)
    (link,) = report.faults
    assert link.acted is None
    assert link.uncounted == (
        "no connection was cut, and the nodes' backend reports no connection attempts, so "
        "refused ones could not be counted"
    )
    assert report.unexpectedly_idle == []


def three_nodes(name: str, *faults: dict[str, Any]) -> Scenario:
    """Three nodes with a 20 s join, and ``faults``."""
    data = {"name": name, "description": f"{name}.", "nodes": 3, "timeouts": {"join": 20}}
    return parse({**data, "fault": list(faults)}, "<test>")


def test_a_fault_whose_time_or_event_never_came_is_reported_as_never_fired_and_not_acting() -> None:
    on_failed = {"on": "failed", "on_node": 1, "after": 1}
    scenario = three_nodes(
        "a-kill-due-after-the-run-and-a-toxic-on-an-event-that-never-comes",
        {"kind": "kill", "nodes": [2], "at": 600},
        {"kind": "toxic", "nodes": [1], "type": "latency", "attributes": {"latency": 10}}
        | on_failed,
    )
    report = run_one(scenario, embedded_proxy, 3)
    assert report.passed, report.problems or report.error
    kill, toxic = report.faults
    assert (kill.index, kill.kind, kill.nodes, kill.fired) == (0, "kill", [2], False)
    assert kill.detail == "at 600.00 s"
    assert re.fullmatch(
        r"did not act \(never fired: every node had ended by \d+\.\d\d s\)", kill.effects
    )
    assert (toxic.index, toxic.nodes, toxic.fired, toxic.detail) == (
        1, [1], False, "1 s after node 1's 'failed'",
    )  # fmt: skip
    assert toxic.effects == "did not act (never fired: node 1 never reported 'failed')"
    assert report.unexpectedly_idle == [kill, toxic]


def test_a_toxics_record_says_it_acts_one_way_only_and_which() -> None:
    # A toxic's stream defaults to downstream: a latency without 'stream' slows the store's
    # replies only, which surprised a user expecting a slow link both ways.
    latency = {"kind": "toxic", "nodes": [1], "type": "latency", "attributes": {"latency": 10}}
    scenario = three_nodes("one-way-toxics", latency, latency | {"stream": "upstream"})
    report = run_one(scenario, embedded_proxy, 3)
    assert report.passed, report.problems or report.error
    default, upstream = report.faults
    assert default.detail == "latency downstream (store to node only) {'latency': 10}"
    assert upstream.detail == "latency upstream (node to store only) {'latency': 10}"


def test_an_interrupted_run_says_its_faults_due_later_were_not_reached() -> None:
    scenario = three_nodes(
        "interrupted-before-the-kill",
        {"kind": "absent", "nodes": [2]},
        {"kind": "kill", "nodes": [1], "at": 600},
    )
    stop = threading.Event()
    stop.set()  # Ctrl-C already pressed: the run stops as soon as its nodes are started
    report = run_one(scenario, embedded_proxy, 3, stop)
    assert report.interrupted
    absent, kill = report.faults
    assert absent.acted == {"nodes never started": 1}
    assert (kill.fired, kill.reached, kill.idle) == (False, False, False)
    assert kill.effects == "not reached: the run was interrupted before it acted"
    assert report.unexpectedly_idle == []
