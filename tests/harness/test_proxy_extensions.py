"""Extensions beyond Toxiproxy: a seed that makes every random choice reproducible, and
an event log of which toxic acted on which connection and when (embedded server only)."""

from __future__ import annotations

import socket
import threading

import pytest
import requests
from proxy_helpers import UpstreamServer, connect, recv_exactly, recv_until_closed

from harness.errors import ProxyStartError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient


def rolls(seed: int, upstream: UpstreamServer, connections: int = 16) -> list[tuple[int, str]]:
    """Which connections a toxicity-0.5 toxic applied to, on a fresh server with ``seed``."""
    with ToxiproxyServer(seed=seed) as server:
        client = ToxiproxyClient(server.host, server.port)
        proxy = client.create_proxy("rolls", upstream.address)
        client.add_toxic("rolls", "latency", toxicity=0.5, attributes={"latency": 0})
        for _ in range(connections):
            with connect(proxy.listen_address) as sock:
                sock.sendall(b"x")
                assert recv_exactly(sock, 1) == b"x"
        return [
            (event.connection, event.action)
            for event in server.events(proxy="rolls")
            if event.action in {"applied", "skipped"}
        ]


def test_the_same_seed_reproduces_every_toxicity_roll(upstream: UpstreamServer) -> None:
    first, second = rolls(1234, upstream), rolls(1234, upstream)
    assert first == second
    assert {action for _, action in first} == {"applied", "skipped"}
    assert [number for number, _ in first] == list(range(1, 17))


def test_a_different_seed_gives_different_rolls(upstream: UpstreamServer) -> None:
    assert rolls(1234, upstream) != rolls(4321, upstream)


def test_the_event_log_names_the_toxic_connection_and_action(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("logged", upstream.address)
    client.add_toxic("logged", "reset_peer", stream="upstream")
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"boom")
        with pytest.raises(ConnectionResetError):
            recv_until_closed(sock)
    events = client.events(proxy="logged")
    reset = [e for e in events if e["action"] == "reset"]
    assert len(reset) == 1
    assert reset[0]["toxic"] == "reset_peer_upstream"
    assert reset[0]["connection"] == 1
    assert reset[0]["time"] >= 0
    later = client.events(since=reset[0]["seq"])
    assert all(e["seq"] > reset[0]["seq"] for e in later)
    assert client.events(proxy="some_other_proxy") == []
    added = [e for e in events if e["action"] == "toxic added"]
    assert [e["toxic"] for e in added] == ["reset_peer_upstream"]
    assert added[0]["seq"] < reset[0]["seq"]


def test_the_event_log_over_http_matches_the_in_process_view(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    client.create_proxy("twin", upstream.address)
    body = requests.get(f"{embedded.url}/events", timeout=10).json()
    assert body["events"] == [event.to_json() for event in embedded.events()]
    assert body["last"] == embedded.events()[-1].seq
    assert body["dropped"] == 0


def test_the_seed_can_be_read_and_replaced(embedded: ToxiproxyServer) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    assert client.seed() == embedded.seed
    client.set_seed(99)
    assert client.seed() == 99


@pytest.mark.parametrize("body", [{"seed": "99"}, {"seed": True}, [], {}])
def test_setting_a_seed_that_is_not_an_integer_is_a_400(
    embedded: ToxiproxyServer, body: object
) -> None:
    response = requests.post(f"{embedded.url}/seed", json=body, timeout=10)
    assert response.status_code == 400
    assert "seed" in response.json()["error"]


def test_a_bad_since_parameter_is_a_400_naming_it(embedded: ToxiproxyServer) -> None:
    response = requests.get(f"{embedded.url}/events?since=yesterday", timeout=10)
    assert response.status_code == 400
    assert "'since'" in response.json()["error"]


def test_the_embedded_server_reports_a_taken_api_port_and_leaves_no_thread() -> None:
    threads_before = {t.ident for t in threading.enumerate()}
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        server = ToxiproxyServer(port=squatter.getsockname()[1])
        with pytest.raises(ProxyStartError, match="bind: address already in use"):
            server.start()
    assert {t.ident for t in threading.enumerate()} <= threads_before


def test_the_embedded_server_stops_its_proxies_when_it_stops(upstream: UpstreamServer) -> None:
    with ToxiproxyServer() as server:
        proxy = ToxiproxyClient(server.host, server.port).create_proxy("gone", upstream.address)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.listen_address, timeout=5)
