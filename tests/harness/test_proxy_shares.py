"""More links than one proxy process holds are shared out over proxy processes (issue 29 §1:
10,240 links in one process need 30,720 descriptors, past what one process may open)."""

from __future__ import annotations

import multiprocessing
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from harness.errors import ProxyStartError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.proxy.info import ProxyInfo
from harness.proxy.process import ProxyProcess
from harness.world.base import Layout, ToxicSpec
from harness.world.local.topology import Topology
from harness.world.proxied.links import (
    LINKS_PER_PROXY,
    LINKS_PER_REQUEST,
    ProxyLinks,
    make_links,
    shares,
)


def test_shares_cut_the_nodes_in_order_into_at_most_per_each() -> None:
    assert shares([5, 1, 2, 4, 3], per=2) == [[1, 2], [3, 4], [5]]
    assert [len(s) for s in shares(range(1, 10_240))] == [LINKS_PER_PROXY] * 4 + [2047]


@pytest.fixture
def server() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer() as started:
        yield started


def test_links_past_one_proxys_share_are_on_proxy_processes_that_relay_and_take_toxics(
    server: ToxiproxyServer,
) -> None:
    client = ToxiproxyClient(server.host, server.port)
    ctx = multiprocessing.get_context("spawn")
    topo = Topology(Layout(tag="shares", nodes=6, host="127.0.0.1"), client, ctx)
    topo.proxy_seed, topo.links_per_proxy = 7, 2
    topo.build()
    store = socket.socket()
    try:
        # 5 links in shares of 2: nodes 1-2 on the world's proxy, 3-4 and 5 on two processes
        assert len(topo.processes) == 2
        assert set(topo.routes) == {3, 4, 5}
        assert topo.routes[3] is topo.routes[4] is not topo.routes[5]
        assert {p.name for p in client.proxies().values()} == {"shares-node1", "shares-node2"}
        assert {p.name for p in topo.routes[5].proxies().values()} == {"shares-node5"}
        # node 5's link relays to the store's port (adopted here as node 0 would)
        listen = topo.take_listen_socket()
        assert listen is not None
        listen.listen()
        port = int(topo.endpoint(5).rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as node5:
            store, _ = listen.accept()
            node5.sendall(b"ping")
            store.settimeout(30)
            assert store.recv(4) == b"ping"
        listen.close()
        # a toxic on nodes 1 and 5 lands on both proxies
        links = ProxyLinks(client, topo.proxies, "no log", topo.routes)
        toxic = ToxicSpec(
            name="slow",
            type="latency",
            stream="downstream",
            toxicity=1.0,
            attributes={"latency": 5},
        )
        links.add_toxic([1, 5], toxic)
        assert [t.name for t in client.toxics("shares-node1")] == ["slow"]
        assert [t.name for t in topo.routes[5].toxics("shares-node5")] == ["slow"]
    finally:
        store.close()
        problems = topo.teardown()
    assert problems == []
    assert all(p.port and not p.running for p in topo.processes)
    assert client.proxies() == {}


def test_a_proxy_process_that_cannot_start_says_so_and_names_its_log() -> None:
    proc = ProxyProcess("203.0.113.1", seed=1).launch()  # not an address of this machine
    with pytest.raises(ProxyStartError, match=r"ended with status .* its errors are in"):
        proc.ready(deadline=time.monotonic() + 120)
    proc.stop()
    assert proc.log is not None
    assert "cannot assign requested address" in proc.log.read_text()
    proc.log.unlink()


class _RecordingClient:
    """Stands in for a ToxiproxyClient: records each populate request, answers as a proxy."""

    def __init__(self) -> None:
        self.requests: list[int] = []

    def populate(self, proxies: list[dict[str, object]]) -> list[ProxyInfo]:
        self.requests.append(len(proxies))
        return [
            ProxyInfo(str(p["name"]), "127.0.0.1:" + str(40000 + i), str(p["upstream"]), True)
            for i, p in enumerate(proxies)
        ]


def test_links_are_made_in_batches_of_at_most_links_per_request() -> None:
    client = _RecordingClient()
    upstream = dict.fromkeys(range(1, 601), "127.0.0.1:9")
    names, ports = make_links(client, "t", "127.0.0.1:0", upstream)  # type: ignore[arg-type]
    assert client.requests == [LINKS_PER_REQUEST, LINKS_PER_REQUEST, 600 - 2 * LINKS_PER_REQUEST]
    assert sorted(names) == list(range(1, 601))
    assert names[600] == "t-node600"
    assert ports[1] == 40000


def test_a_proxy_process_ends_when_the_process_that_started_it_is_killed() -> None:
    script = (
        "import sys, time\n"
        "from harness.proxy.process import ProxyProcess\n"
        "proc = ProxyProcess('127.0.0.1', 1).launch()\n"
        "proc.ready(time.monotonic() + 120)\n"
        "print(proc._proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait()
        child.wait(timeout=60)  # psutil.TimeoutExpired if the proxy outlives its parent
        assert not child.is_running()
    finally:
        parent.kill()
        parent.wait()
