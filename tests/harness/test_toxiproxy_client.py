"""The typed client: toxiproxy-python's quirks turned into typed values and clear errors."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest
import toxiproxy.api
from proxy_helpers import UpstreamServer, connect

from harness.errors import (
    AlreadyExistsError,
    InvalidRequestError,
    NotFoundError,
    ProxyStartError,
    ToxiproxyProtocolError,
    ToxiproxyTimeoutError,
    ToxiproxyUnreachableError,
)
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient


class _NotToxiproxy(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()
        self.wfile.write(b"404 page not found\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def plain_http() -> Iterator[ToxiproxyClient]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotToxiproxy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ToxiproxyClient("127.0.0.1", server.server_address[1], timeout=5)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _WebServer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # a 404 page, several lines of HTML
        body = b"<!DOCTYPE HTML>\n<html>\n<body>\n<h1>Error response</h1>\n</body>\n</html>\n"
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_an_http_server_that_is_not_toxiproxy_is_named_in_one_line() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WebServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = ToxiproxyClient("127.0.0.1", server.server_address[1], timeout=5)
        with pytest.raises(NotFoundError) as caught:
            client.version()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert str(caught.value) == (
        f"toxiproxy at {client.url} refused GET /version: HTTP 404 with a web page, not "
        "Toxiproxy's JSON: is a Toxiproxy server there?"
    )


def test_a_plain_text_error_body_is_shown_on_one_line(plain_http: ToxiproxyClient) -> None:
    with pytest.raises(NotFoundError) as caught:
        plain_http.version()
    assert str(caught.value).endswith("refused GET /version: HTTP 404: 404 page not found")
    assert caught.value.detail == "404 page not found"


@pytest.mark.parametrize("url", ["127.0.0.1:8474", "https://h:1", "http://h", "http://:8474"])
def test_from_url_rejects_anything_but_http_host_port(url: str) -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        ToxiproxyClient.from_url(url)


def test_from_url_reads_host_and_port() -> None:
    client = ToxiproxyClient.from_url("http://127.0.0.2:9000")
    assert (client.host, client.port, client.url) == ("127.0.0.2", 9000, "http://127.0.0.2:9000")


def test_a_server_that_is_not_running_is_a_connection_error_naming_it() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))  # bound, not listening: connects are refused
        client = ToxiproxyClient("127.0.0.1", unused.getsockname()[1], timeout=5)
        with pytest.raises(
            ToxiproxyUnreachableError,
            match=f"cannot reach toxiproxy at {client.url} for GET /proxies: connection refused;",
        ):
            client.proxies()
        with pytest.raises(ConnectionError):
            client.create_proxy("x", "127.0.0.1:1")


def test_a_server_that_never_answers_is_a_timeout_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (backlog), never replies
        client = ToxiproxyClient("127.0.0.1", silent.getsockname()[1], timeout=0.3)
        with pytest.raises(
            ToxiproxyTimeoutError, match=r"did not answer GET /proxies within 0\.3 s"
        ):
            client.proxies()
        with pytest.raises(TimeoutError):
            client.reset()


def test_a_port_in_use_is_a_proxy_start_error_not_a_key_error(
    toxiproxy_server: ToxiproxyClient, name: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        with pytest.raises(ProxyStartError, match=r"HTTP 500: .*address already in use") as info:
            toxiproxy_server.create_proxy(name, "127.0.0.1:1", f"127.0.0.1:{port}")
    assert info.value.status == 500
    assert "address already in use" in info.value.detail


def test_unknown_names_are_not_found_errors(toxiproxy_server: ToxiproxyClient) -> None:
    with pytest.raises(NotFoundError, match="proxy not found"):
        toxiproxy_server.get_proxy("harness_test_absent")
    with pytest.raises(NotFoundError, match="DELETE /proxies/harness_test_absent"):
        toxiproxy_server.delete_proxy("harness_test_absent")
    with pytest.raises(LookupError):
        toxiproxy_server.disable("harness_test_absent")


def test_taken_names_are_already_exists_errors(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    with pytest.raises(AlreadyExistsError, match="proxy already exists"):
        toxiproxy_server.create_proxy(name, upstream.address)
    toxiproxy_server.add_toxic(name, "noop")
    with pytest.raises(AlreadyExistsError, match="toxic already exists"):
        toxiproxy_server.add_toxic(name, "noop")


def test_invalid_toxics_are_invalid_request_errors(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    with pytest.raises(InvalidRequestError, match="stream was invalid") as info:
        toxiproxy_server.add_toxic(name, "noop", stream="sideways")
    assert info.value.status == 400
    with pytest.raises(ValueError, match="invalid toxic type"):
        toxiproxy_server.add_toxic(name, "gremlins")


def test_add_toxic_returns_the_toxic_as_stored(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    added = toxiproxy_server.add_toxic(name, "latency", attributes={"latency": 7})
    assert (added.name, added.type, added.stream, added.toxicity) == (
        "latency_downstream",
        "latency",
        "downstream",
        1.0,
    )
    assert dict(added.attributes) == {"latency": 7, "jitter": 0}
    assert toxiproxy_server.toxics(name) == [added]


def test_update_proxy_and_down_change_the_proxy(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    with toxiproxy_server.down(name):
        assert toxiproxy_server.get_proxy(name).enabled is False
    assert toxiproxy_server.get_proxy(name).enabled is True
    moved = toxiproxy_server.update_proxy(name, listen="127.0.0.1:0")
    with connect(moved.listen_address) as sock:
        sock.sendall(b"hi")
        assert sock.recv(2) == b"hi"


def test_the_client_leaves_toxiproxy_pythons_global_address_as_it_found_it(
    upstream: UpstreamServer,
) -> None:
    consumer = toxiproxy.api.APIConsumer
    before = consumer.host, consumer.port
    with ToxiproxyServer() as one, ToxiproxyServer() as two:
        first = ToxiproxyClient(one.host, one.port)
        second = ToxiproxyClient(two.host, two.port)
        first.create_proxy("only_on_one", upstream.address)
        second.create_proxy("only_on_two", upstream.address)
        assert set(first.proxies()) == {"only_on_one"}
        assert set(second.proxies()) == {"only_on_two"}
    assert (consumer.host, consumer.port) == before


def test_extensions_on_a_server_without_them_are_protocol_errors(
    plain_http: ToxiproxyClient,
) -> None:
    with pytest.raises(ToxiproxyProtocolError, match="has no /events endpoint"):
        plain_http.events()
    with pytest.raises(ToxiproxyProtocolError, match="has no /seed endpoint"):
        plain_http.seed()
