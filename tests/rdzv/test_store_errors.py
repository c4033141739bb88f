"""Bind and connect failures of the store: fast, named, and honest about whose fault it is."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import re
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest
from scripted_peer import ScriptedPeer

from conftest import InThread
from rdzv.errors import StoreBindError, StoreConnectionError, StoreProtocolError, StoreTimeoutError
from rdzv.events import EventCollector
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer
from rdzv.store.wire import _wire


def _ipv6_loopback_available() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not _ipv6_loopback_available(), reason="no IPv6 loopback")


@contextlib.contextmanager
def _squatter(host: str = "127.0.0.1", listen: bool = True) -> Iterator[socket.socket]:
    """A plain socket holding an ephemeral port (listening, or merely bound: refusing)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        if listen:
            sock.listen(16)
        yield sock


def _listening_ips(port: int) -> set[str]:
    return {
        conn.laddr.ip
        for conn in psutil.Process().net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port
    }


# --- binding --------------------------------------------------------------------------------


@pytest.mark.parametrize("squatter_host", ["127.0.0.1", "0.0.0.0"])
def test_binding_a_port_in_use_fails_naming_host_port_and_errno(squatter_host: str) -> None:
    with _squatter(squatter_host) as squatter:
        port = squatter.getsockname()[1]
        server = StoreServer("127.0.0.1", port)
        pattern = (
            rf"port {port} on 127\.0\.0\.1 is already in use by another process "
            rf"\(errno {errno.EADDRINUSE} EADDRINUSE; endpoint host '127\.0\.0\.1'\)"
        )
        with pytest.raises(StoreBindError, match=pattern) as info:
            server.start()
    error = info.value
    assert (error.host, error.port, error.errno) == ("127.0.0.1", port, errno.EADDRINUSE)
    assert isinstance(error, ConnectionError)
    assert isinstance(error, RuntimeError)
    assert not server.running


def test_a_master_on_a_port_in_use_fails_at_once_instead_of_retrying() -> None:
    with _squatter() as squatter:
        port = squatter.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(StoreBindError, match=rf"port {port} .*already in use"):
            TCPStore("127.0.0.1", port, 1, True, timeout=120.0)
        # Generous bound: "at once" means no connect retries up to the 120 s timeout.
        assert time.monotonic() - start < 30


@needs_ipv6
def test_a_bind_failure_on_one_loopback_family_releases_the_other() -> None:
    with _squatter("::1") as squatter:
        port = squatter.getsockname()[1]
        with pytest.raises(StoreBindError, match=rf"port {port} on \[::1\] is already in use"):
            StoreServer("localhost", port).start()
        # 127.0.0.1:port was bound first; the failed start must have let it go.
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as check:
            check.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", pytest.param("::1", marks=needs_ipv6)],
)
def test_a_loopback_endpoint_listens_on_loopback_only(host: str) -> None:
    with StoreServer(host, 0) as server:
        ips = {address for address, _ in server.addresses}
        assert ips
        assert all(ipaddress.ip_address(ip).is_loopback for ip in ips), ips
        assert {port for _, port in server.addresses} == {server.port}
        assert _listening_ips(server.port) == ips


def test_a_wildcard_endpoint_listens_on_every_interface() -> None:
    with StoreServer("", 0) as server:
        ips = {address for address, _ in server.addresses}
        assert ips & {"::", "0.0.0.0"}
        assert _listening_ips(server.port) == ips


def _ephemeral_range() -> tuple[int, int]:
    path = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if not path.exists():
        return 1024, 65535
    low, high = path.read_text().split()
    return int(low), int(high)


def test_port_zero_gives_an_ephemeral_port_that_clients_reach() -> None:
    low, high = _ephemeral_range()
    with TCPStore("127.0.0.1", 0, None, True, timeout=10.0) as master:
        assert master.server is not None
        assert master.port == master.server.port
        assert low <= master.port <= high
        with TCPStore("127.0.0.1", master.port, timeout=10.0) as client:
            client.set("k", "v")
            assert master.get("k") == b"v"


@needs_ipv6
def test_an_ipv6_loopback_endpoint_serves_ipv6_clients_and_names_itself_in_brackets() -> None:
    with TCPStore("::1", 0, None, True, timeout=10.0) as master:
        assert master.server is not None
        assert master.server.addresses == [("::1", master.port)]
        with TCPStore("::1", master.port, timeout=10.0) as client:
            client.set("k", "v")
            assert master.get("k") == b"v"
            client.set_timeout(0.1)
            with pytest.raises(StoreTimeoutError, match=re.escape(f"[::1]:{master.port}")):
                client.get("missing")


# --- connecting -----------------------------------------------------------------------------


def test_a_client_with_nothing_listening_fails_after_its_timeout_naming_everything() -> None:
    with _squatter(listen=False) as reserved:  # holds the port; connections are refused
        port = reserved.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(StoreConnectionError) as info:
            TCPStore("127.0.0.1", port, timeout=0.5)
        measured = time.monotonic() - start
    message = str(info.value)
    found = re.search(
        rf"no rendezvous store answered at 127\.0\.0\.1:{port}: gave up after "
        r"(?P<attempts>\d+) connection attempts in (?P<elapsed>\d+\.\d+) s \(timeout 0\.5 s\); "
        r"last cause: ConnectionRefusedError",
        message,
    )
    assert found, message
    assert float(found["elapsed"]) >= 0.5
    assert measured >= 0.5
    assert int(found["attempts"]) >= 2
    assert isinstance(info.value.__cause__, ConnectionRefusedError)
    assert not isinstance(info.value, TimeoutError)


class _FirstAttempt(EventCollector):
    """Collects rdzv events and sets ``seen`` at the first ``connect_attempt``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self.events and self.events[-1]["event"] == "connect_attempt":
            self.seen.set()


@contextlib.contextmanager
def _collecting(name: str) -> Iterator[_FirstAttempt]:
    logger = logging.getLogger(name)
    collector = _FirstAttempt()
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(collector)
    try:
        yield collector
    finally:
        logger.removeHandler(collector)
        logger.setLevel(old_level)


def test_a_client_started_before_the_server_binds_connects_once_it_listens() -> None:
    reserved = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    reserved.bind(("127.0.0.1", 0))
    port = reserved.getsockname()[1]
    fd = reserved.detach()  # the server takes the bound socket over (no probe-then-close)
    servers: list[StoreServer] = []
    with _collecting("rdzv.client") as collector:

        def start_server_after_first_attempt() -> None:
            if collector.seen.wait(30):
                servers.append(StoreServer("127.0.0.1", port, listen_fd=fd).start())

        starter = threading.Thread(target=start_server_after_first_attempt, daemon=True)
        starter.start()
        try:
            with TCPStore("127.0.0.1", port, timeout=30.0) as client:
                starter.join(30)
                assert servers, "the server never started"
                assert client.connect_attempts >= 2
                client.set("late", "but-there")
                assert client.get("late") == b"but-there"
        finally:
            collector.seen.set()
            starter.join(30)
            for server in servers:
                server.close()
            if not servers:
                socket.socket(fileno=fd).close()
    attempts = [e for e in collector.events if e["event"] == "connect_attempt"]
    connected = [e for e in collector.events if e["event"] == "connected"]
    assert attempts
    assert "ConnectionRefusedError" in attempts[0]["error"]
    assert attempts[0]["endpoint"] == f"127.0.0.1:{port}"
    assert len(connected) == 1
    assert connected[0]["attempts"] == len(attempts) + 1


def test_a_silent_acceptor_is_reported_as_not_a_rendezvous_store_at_the_deadline() -> None:
    with _squatter() as silent:  # listens, never accepts, never answers
        port = silent.getsockname()[1]
        with pytest.raises(StoreConnectionError) as info:
            TCPStore("127.0.0.1", port, timeout=1.0)
    message = str(info.value)
    assert re.search(
        rf"at 127\.0\.0\.1:{port}\b.*gave up after \d+ connection attempts? in \d+\.\d+ s "
        r"\(timeout 1 s\)",
        message,
    )
    assert "never answers the handshake" in message
    assert "not a rendezvous store" in message
    # The cause in words, never an internal class name ("_Silent: ...").
    assert re.search(
        r"last cause: the peer accepted the connection but did not answer the handshake "
        r"within \d+\.\d s$",
        message,
    ), message
    assert "_Silent" not in message


class _HttpBanner(socketserver.BaseRequestHandler):
    """Answers whatever arrives with an HTTP error, then closes politely."""

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(5)
        with contextlib.suppress(OSError):
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(1024):
                pass


class _BannerServer(socketserver.ThreadingTCPServer):
    daemon_threads = True


@pytest.fixture
def http_banner() -> Iterator[int]:
    server = _BannerServer(("127.0.0.1", 0), _HttpBanner)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_an_http_server_is_reported_as_not_a_rendezvous_store_at_the_deadline(
    http_banner: int,
) -> None:
    with pytest.raises(StoreConnectionError) as info:
        TCPStore("127.0.0.1", http_banner, timeout=1.0)
    message = str(info.value)
    expected = f"something answered at 127.0.0.1:{http_banner} but it is not a rendezvous store"
    assert expected in message, message
    assert "HTTP/1.1 400" in message
    assert isinstance(info.value.__cause__, StoreProtocolError)


def test_each_attempt_against_an_http_server_is_logged_as_not_a_rendezvous_store(
    http_banner: int,
) -> None:
    with _collecting("rdzv.client") as collector, pytest.raises(StoreConnectionError):
        TCPStore("127.0.0.1", http_banner, timeout=1.0)
    errors = [e["error"] for e in collector.events if e["event"] == "connect_attempt"]
    assert len(errors) >= 2
    assert re.match(
        r"StoreProtocolError: not a rendezvous store: the PING reply was b'HTTP/1\.1 400",
        errors[0],
    ), errors[0]


# --- a wait deadline racing a late key (scripted peer) ----------------------------------------


@pytest.fixture(params=[True, False], ids=["rdzv-peer", "torch-peer"])
def peer(request: pytest.FixtureRequest) -> Iterator[ScriptedPeer]:
    scripted = ScriptedPeer(pipelined=request.param)
    try:
        yield scripted
    finally:
        scripted.close()


_STOP = _wire.encode_u8(_wire.STOP_WAITING)
_CANCELED = _wire.encode_u8(_wire.WAIT_CANCELED)


def _expect_get_until_cancel(peer: ScriptedPeer) -> None:
    peer.expect(_wire.Wait)
    if peer.pipelined:
        peer.expect(_wire.Get)
    peer.expect(_wire.CancelWait)  # sent by the client at its deadline


# The client gives the store 0.4 s past its deadline to answer CANCEL_WAIT, so those answers
# are scripted ahead: the peer sends them the moment the request arrives, on any machine.


def test_a_key_that_arrives_as_the_deadline_passes_is_returned_and_replies_stay_in_step(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        if peer.pipelined:  # the server ran the held GET before it saw CANCEL_WAIT
            peer.answer(_wire.CancelWait, _STOP + _wire.encode_bytes(b"late") + _CANCELED)
        else:
            peer.answer(_wire.CancelWait, _STOP + _CANCELED)
            peer.answer(_wire.Get, _wire.encode_bytes(b"late"))
        client.set_timeout(0.05)
        getter = InThread(client.get, "k")
        _expect_get_until_cancel(peer)
        if not peer.pipelined:
            peer.expect(_wire.Get)
        assert getter.outcome() == b"late"
        client.set_timeout(10.0)
        adder = InThread(client.add, "n", 5)
        peer.expect(_wire.Add)
        peer.send(_wire.encode_i64(5))
        assert adder.outcome() == 5


def test_a_cancelled_wait_times_out_and_the_next_reply_is_read_correctly(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        peer.answer(_wire.CancelWait, _CANCELED)
        client.set_timeout(0.05)
        getter = InThread(client.get, "k")
        _expect_get_until_cancel(peer)
        with pytest.raises(
            StoreTimeoutError, match=r"^wait timeout after 50ms, keys: /k \(store at"
        ):
            getter.outcome()
        client.set_timeout(10.0)
        counter = InThread(client.num_keys)
        peer.expect(_wire.GetNumKeys)
        peer.send(_wire.encode_i64(3))
        assert counter.outcome() == 3


def test_a_peer_answering_cancel_wait_with_junk_is_a_protocol_error(peer: ScriptedPeer) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        peer.answer(_wire.CancelWait, b"\x07")
        client.set_timeout(0.05)
        getter = InThread(client.get, "k")
        _expect_get_until_cancel(peer)
        with pytest.raises(StoreProtocolError, match="unexpected reply 7 to CANCEL_WAIT"):
            getter.outcome()


def test_after_an_oversized_reply_the_client_never_reads_leftovers_as_later_replies(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        peer.send(_STOP)
        peer.expect(_wire.Get)  # pipelined behind the WAIT (rdzv) or sent after STOP (torch)
        peer.send(struct.pack("<Q", 2**40))  # a 1 TiB value: over the client's limit
        with pytest.raises(StoreProtocolError, match="exceeds the limit"):
            getter.outcome()
        # Whatever the client does next, it must not report the junk as the ADD's answer.
        adder = InThread(client.add, "n", 1)
        if not adder.done.wait(2):  # it sent ADD on the same connection and awaits a reply
            peer.expect(_wire.Add)
            peer.send(_wire.encode_i64(1))
        with pytest.raises(StoreConnectionError):
            adder.outcome()
