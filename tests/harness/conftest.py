"""Fixtures for the fault-proxy tests: servers under test, upstream peers, clients.

``toxiproxy_server`` is parametrised over the embedded server and, when ``TOXIPROXY_URL``
is set (e.g. ``http://127.0.0.1:8474``), a real Toxiproxy, so the same tests check both.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator

import pytest
import toxiproxy
import toxiproxy.api
from proxy_helpers import UpstreamServer

from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient

SEED = 20260


@pytest.fixture
def upstream() -> Iterator[UpstreamServer]:
    """An echo server on 127.0.0.1 (port 0), shut down after the test."""
    server = UpstreamServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.close_all()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def embedded() -> Iterator[ToxiproxyServer]:
    """A fresh embedded Toxiproxy-compatible server on a free loopback port."""
    with ToxiproxyServer(seed=SEED) as server:
        yield server


def _real_url() -> str | None:
    return os.environ.get("TOXIPROXY_URL") or None


@pytest.fixture(params=["embedded", "real"])
def toxiproxy_server(request: pytest.FixtureRequest) -> Iterator[ToxiproxyClient]:
    """A typed client for the server under test: the embedded one, or a real Toxiproxy.

    The real one is used only when ``TOXIPROXY_URL`` is set; proxies the test created are
    deleted afterwards so a shared server is left as found.
    """
    if request.param == "embedded":
        with ToxiproxyServer(seed=SEED) as server:
            yield ToxiproxyClient(server.host, server.port, timeout=10)
        return
    url = _real_url()
    if url is None:
        pytest.skip("set TOXIPROXY_URL=http://host:port to run against a real Toxiproxy")
    client = ToxiproxyClient.from_url(url, timeout=10)
    before = set(client.proxies())
    try:
        yield client
    finally:
        for name in set(client.proxies()) - before:
            client.delete_proxy(name)


@pytest.fixture
def legacy(toxiproxy_server: ToxiproxyClient) -> Iterator[toxiproxy.Toxiproxy]:
    """The unmodified toxiproxy-python client pointed at the server under test."""
    consumer = toxiproxy.api.APIConsumer
    saved = consumer.host, consumer.port
    consumer.host, consumer.port = toxiproxy_server.host, toxiproxy_server.port
    try:
        yield toxiproxy.Toxiproxy()
    finally:
        consumer.host, consumer.port = saved


@pytest.fixture
def name() -> str:
    """A proxy name no other test (or other user of a shared server) will use."""
    return f"harness_test_{uuid.uuid4().hex[:10]}"
