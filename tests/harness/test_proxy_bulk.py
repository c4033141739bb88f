"""Many proxies in one call: the embedded server's /bulk routes, and the client's fallback to
one request per proxy on a server without them (a real Toxiproxy)."""

from __future__ import annotations

from typing import Any

import pytest
from proxy_helpers import UpstreamServer, connect, recv_exactly

from harness.errors import AlreadyExistsError, HarnessError, NotFoundError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient


class NoBulkClient(ToxiproxyClient):
    """A client whose server answers /bulk as a real Toxiproxy does (no such route)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bulk_requests = 0

    def _raw(self, method: str, path: str, body: object = None, ok: int = 200) -> Any:
        if path.startswith("/bulk"):
            self.bulk_requests += 1
            raise NotFoundError("404", status=404, detail="404 page not found")
        return super()._raw(method, path, body, ok)


@pytest.fixture(params=["native", "fallback"])
def client(request: pytest.FixtureRequest, embedded: ToxiproxyServer) -> ToxiproxyClient:
    kind = ToxiproxyClient if request.param == "native" else NoBulkClient
    return kind(embedded.host, embedded.port, timeout=10)


def make(client: ToxiproxyClient, upstream: UpstreamServer, n: int) -> list[str]:
    names = [f"bulk{i}" for i in range(n)]
    client.populate(
        [{"name": n, "listen": "127.0.0.1:0", "upstream": upstream.address} for n in names]
    )
    return names


def toxic_names(client: ToxiproxyClient, proxy: str) -> list[str]:
    return [t.name for t in client.toxics(proxy)]


def test_a_toxic_goes_on_and_off_every_listed_proxy_and_no_other(
    client: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    names = make(client, upstream, 5)
    client.bulk.add_toxic(names[:4], "latency", name="slow", attributes={"latency": 5})
    assert [toxic_names(client, n) for n in names] == [["slow"]] * 4 + [[]]
    assert client.get_toxic(names[2], "slow").attributes["latency"] == 5
    client.bulk.remove_toxic(names[:4], "slow")
    assert all(toxic_names(client, n) == [] for n in names)
    assert client.bulk.native is (type(client) is ToxiproxyClient)


def test_links_go_down_and_up_together(client: ToxiproxyClient, upstream: UpstreamServer) -> None:
    names = make(client, upstream, 3)
    client.bulk.set_enabled(names[:2], False)
    assert [client.get_proxy(n).enabled for n in names] == [False, False, True]
    with pytest.raises(ConnectionRefusedError):
        connect(client.get_proxy(names[0]).listen_address).close()
    client.bulk.set_enabled(names[:2], True)
    with connect(client.get_proxy(names[0]).listen_address) as sock:
        sock.sendall(b"up")
        assert recv_exactly(sock, 2) == b"up"


def test_delete_removes_every_listed_proxy(
    client: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    names = make(client, upstream, 4)
    assert client.delete_proxies(names[1:]) == []
    assert sorted(client.proxies()) == [names[0]]


def test_an_unknown_name_changes_nothing_and_is_named(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    names = make(client, upstream, 2)
    with pytest.raises(NotFoundError, match="proxy not found: nosuch"):
        client.bulk.add_toxic([*names, "nosuch"], "latency", name="slow")
    assert all(toxic_names(client, n) == [] for n in names)
    with pytest.raises(NotFoundError, match="nosuch"):
        client.bulk.set_enabled(["nosuch", names[0]], False)
    assert client.get_proxy(names[0]).enabled


def test_a_toxic_refused_on_one_proxy_is_added_to_none(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    names = make(client, upstream, 3)
    client.add_toxic(names[2], "latency", name="slow")  # the name is taken on the last one
    with pytest.raises(AlreadyExistsError):
        client.bulk.add_toxic(names, "bandwidth", name="slow", attributes={"rate": 1})
    assert [toxic_names(client, n) for n in names] == [[], [], ["slow"]]
    assert client.get_toxic(names[2], "slow").type == "latency"


def test_a_bulk_delete_with_a_name_already_gone_deletes_the_others_and_leaves_nothing(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = ToxiproxyClient(embedded.host, embedded.port)
    names = make(client, upstream, 3)
    client.delete_proxy(names[2])  # gone already, as after a bulk delete that timed out
    problems = client.delete_proxies(names)
    assert client.proxies() == {}
    assert problems == []


def test_a_proxy_that_cannot_be_deleted_is_named(
    embedded: ToxiproxyServer, upstream: UpstreamServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = NoBulkClient(embedded.host, embedded.port)
    names = make(client, upstream, 2)

    def refuse(name: str) -> None:
        raise HarnessError(f"refused to delete {name}")

    monkeypatch.setattr(client, "delete_proxy", refuse)
    problems = client.delete_proxies(names)
    assert sorted(problems) == [f"could not delete proxy {n}: refused to delete {n}" for n in names]


def test_the_fallback_asks_for_the_bulk_route_once(
    embedded: ToxiproxyServer, upstream: UpstreamServer
) -> None:
    client = NoBulkClient(embedded.host, embedded.port)
    names = make(client, upstream, 2)
    client.bulk.add_toxic(names, "latency", name="a")
    client.bulk.add_toxic(names, "latency", name="b", stream="upstream")
    client.bulk.remove_toxic(names, "a")
    assert client.bulk_requests == 1
    assert [toxic_names(client, n) for n in names] == [["b"], ["b"]]
