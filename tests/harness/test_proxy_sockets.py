"""Toxic behaviour measured on real loopback sockets through the proxy under test."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from proxy_helpers import UpstreamServer, connect, is_closed, recv_exactly, recv_until_closed

from harness.errors import ProxyApiError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ProxyInfo, ToxiproxyClient


@pytest.fixture
def proxy(toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str) -> ProxyInfo:
    return toxiproxy_server.create_proxy(name, upstream.address)


def echo_time(sock: socket.socket, payload: bytes = b"ping") -> float:
    start = time.perf_counter()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.perf_counter() - start


def test_data_passes_unchanged_in_both_directions(proxy: ProxyInfo) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    with connect(proxy.listen_address) as sock:
        sock.sendall(payload)
        assert recv_exactly(sock, len(payload)) == payload


def test_downstream_latency_delays_the_reply_by_at_least_the_latency(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "latency", attributes={"latency": 150})
    with connect(proxy.listen_address) as sock:
        assert 0.150 <= echo_time(sock) < 5


def test_two_upstream_latency_toxics_add_up(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    for label in ("first", "second"):
        toxiproxy_server.add_toxic(
            proxy.name, "latency", stream="upstream", name=label, attributes={"latency": 100}
        )
    with connect(proxy.listen_address) as sock:
        assert 0.200 <= echo_time(sock) < 5


def test_toxicity_zero_never_applies_the_toxic(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "timeout", toxicity=0.0, attributes={"timeout": 0})
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"through")
        assert recv_exactly(sock, 7) == b"through"


def test_reset_peer_is_seen_as_connection_reset_by_the_client(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "reset_peer", stream="upstream")
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"hello\n")
        with pytest.raises(ConnectionResetError):
            recv_until_closed(sock)


def test_disabling_drops_live_connections_and_refuses_new_ones(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    with connect(proxy.listen_address) as live:
        echo_time(live)
        with toxiproxy_server.down(proxy.name):
            assert is_closed(live)
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(proxy.listen_address, timeout=5)
    with connect(proxy.listen_address) as again:
        echo_time(again)


def test_a_disabled_proxy_keeps_its_port_until_it_is_enabled_or_deleted(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    proxy = client.create_proxy("kept", upstream.address)
    client.disable("kept")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(proxy.listen_address, timeout=5)
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.bind(proxy.listen_address)  # nothing else can take the port meanwhile
    with socket.socket() as other, pytest.raises(OSError, match="in use"):
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(proxy.listen_address)  # not even a program that offers to share it
    host, port = proxy.listen_address
    with pytest.raises(ProxyApiError, match="address already in use"):
        client.create_proxy("intruder", upstream.address, listen=f"{host}:{port}")
    client.enable("kept")
    assert client.get_proxy("kept").listen_address == proxy.listen_address
    with connect(proxy.listen_address) as again:
        echo_time(again)
    client.disable("kept")
    client.delete_proxy("kept")
    with socket.socket() as other:
        other.bind(proxy.listen_address)  # deleted: the port is free again


def test_limit_data_downstream_delivers_exactly_n_bytes_then_closes(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "limit_data", attributes={"bytes": 100})
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"x" * 300)
        assert recv_until_closed(sock) == b"x" * 100


def test_limit_data_upstream_lets_the_server_see_exactly_n_bytes(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo, upstream: UpstreamServer
) -> None:
    toxiproxy_server.add_toxic(
        proxy.name, "limit_data", stream="upstream", attributes={"bytes": 10}
    )
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"0123456789abcdef")
        assert upstream.accepted.acquire(timeout=10)
        assert upstream.connections[0].ended.wait(10)
        assert bytes(upstream.connections[0].data) == b"0123456789"


def test_timeout_zero_is_a_black_hole_that_keeps_the_connection_open(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "timeout", attributes={"timeout": 0})
    with connect(proxy.listen_address, timeout=0.3) as sock:
        sock.sendall(b"into the void")
        with pytest.raises(TimeoutError):
            sock.recv(100)


def test_removing_a_timeout_toxic_closes_its_connections(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo, upstream: UpstreamServer
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "timeout", attributes={"timeout": 0})
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"lost")
        # The proxy has dialled the upstream, so the connection exists and has the toxic.
        assert upstream.accepted.acquire(timeout=10)
        toxiproxy_server.remove_toxic(proxy.name, "timeout_downstream")
        assert recv_until_closed(sock) == b""


def test_timeout_closes_an_idle_connection_after_the_timeout(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "timeout", attributes={"timeout": 100})
    with connect(proxy.listen_address) as sock:
        start = time.perf_counter()
        assert recv_until_closed(sock) == b""
        assert time.perf_counter() - start < 5


def test_slicer_delivers_the_same_bytes_in_several_pieces(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    attributes = {"average_size": 10, "size_variation": 0, "delay": 20_000}
    toxiproxy_server.add_toxic(proxy.name, "slicer", attributes=attributes)
    payload = bytes(range(100))
    with connect(proxy.listen_address) as sock:
        sock.sendall(payload)
        pieces = []
        while sum(map(len, pieces)) < len(payload):
            pieces.append(sock.recv(1000))
            assert pieces[-1], "connection closed early"
    assert b"".join(pieces) == payload
    assert len(pieces) > 1


def test_bandwidth_slows_a_transfer_to_about_the_rate(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "bandwidth", attributes={"rate": 100})  # 100 KB/s
    payload = b"b" * 50_000
    with connect(proxy.listen_address) as sock:
        assert 0.3 <= echo_time(sock, payload) < 10


def test_slow_close_delays_the_end_of_the_connection(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "slow_close", attributes={"delay": 300})
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"bye")
        assert recv_exactly(sock, 3) == b"bye"
        start = time.perf_counter()
        sock.shutdown(socket.SHUT_WR)
        assert recv_until_closed(sock) == b""
        assert 0.3 <= time.perf_counter() - start < 10


def test_a_client_of_a_dead_upstream_is_accepted_then_closed(
    toxiproxy_server: ToxiproxyClient, name: str
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
        dead = f"127.0.0.1:{unused.getsockname()[1]}"
        proxy = toxiproxy_server.create_proxy(name, dead)
        with connect(proxy.listen_address) as sock:
            assert is_closed(sock)


def test_toxics_added_to_a_live_connection_apply_at_once(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    with connect(proxy.listen_address) as sock:
        echo_time(sock)
        toxiproxy_server.add_toxic(proxy.name, "latency", attributes={"latency": 150})
        assert echo_time(sock) >= 0.150
        toxiproxy_server.update_toxic(proxy.name, "latency_downstream", attributes={"latency": 0})
        toxiproxy_server.remove_toxic(proxy.name, "latency_downstream")
        assert echo_time(sock, b"still here") < 5


def test_a_server_that_speaks_first_is_heard_by_the_client(
    toxiproxy_server: ToxiproxyClient, name: str
) -> None:
    server = UpstreamServer(banner=b"220 hello\r\n")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proxy = toxiproxy_server.create_proxy(name, server.address)
        with connect(proxy.listen_address) as sock:
            assert recv_exactly(sock, 11) == b"220 hello\r\n"
    finally:
        server.shutdown()
        server.close_all()
        server.server_close()
        thread.join(timeout=10)


def test_limit_data_keeps_counting_across_an_update_on_a_live_connection(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "limit_data", attributes={"bytes": 100})
    with connect(proxy.listen_address) as sock:
        sock.sendall(b"a" * 60)
        assert recv_exactly(sock, 60) == b"a" * 60
        toxiproxy_server.update_toxic(proxy.name, "limit_data_downstream", toxicity=1.0)
        sock.sendall(b"b" * 60)
        assert recv_until_closed(sock) == b"b" * 40


def test_latency_does_not_cut_throughput(
    toxiproxy_server: ToxiproxyClient, proxy: ProxyInfo
) -> None:
    toxiproxy_server.add_toxic(proxy.name, "latency", attributes={"latency": 300})
    payload = b"t" * (8 << 20)  # >= 32 reads of <= 256 KiB: >= 9.6 s if each waited in turn
    with connect(proxy.listen_address, timeout=30) as sock:
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        start = time.perf_counter()
        sender.start()
        received = recv_exactly(sock, len(payload))
        elapsed = time.perf_counter() - start
        sender.join(timeout=30)
    assert received == payload
    assert 0.3 <= elapsed < 6
