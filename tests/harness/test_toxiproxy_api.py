"""The Toxiproxy HTTP API, driven by the real toxiproxy-python client and raw requests.

Every test runs against the embedded server and, with ``TOXIPROXY_URL`` set, against a
real Toxiproxy, so the two can be compared wherever a real one exists.
"""

from __future__ import annotations

import json
import socket

import pytest
import requests
import toxiproxy
import toxiproxy.exceptions
from proxy_helpers import UpstreamServer, connect

from harness.proxy.client import ToxiproxyClient


def api(client: ToxiproxyClient, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(method, client.url + path, timeout=10, **kwargs)  # type: ignore[arg-type]


def error_of(response: requests.Response) -> str:
    body = json.loads(response.text)
    assert body["status"] == response.status_code
    return str(body["error"])


def test_version_is_a_2x_version_string_ending_with_a_newline(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient
) -> None:
    raw = legacy.version()
    assert raw.endswith(b"\n")
    assert json.loads(raw)["version"].startswith("2.")
    assert toxiproxy_server.version() == json.loads(raw)["version"]


def test_create_reports_the_real_port_and_lists_proxies_by_name(
    legacy: toxiproxy.Toxiproxy,
    toxiproxy_server: ToxiproxyClient,
    upstream: UpstreamServer,
    name: str,
) -> None:
    proxy = legacy.create(upstream=upstream.address, name=name)
    _host, port = proxy.listen.rsplit(":", 1)
    assert int(port) > 0 and proxy.enabled is True
    listed = api(toxiproxy_server, "GET", "/proxies").json()
    assert isinstance(listed, dict)
    assert listed[name]["listen"] == proxy.listen
    assert listed[name]["toxics"] == []
    assert legacy.get_proxy(name).upstream == upstream.address


def test_create_answers_201_with_the_proxy_and_its_toxics(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    body = {"name": name, "upstream": upstream.address, "listen": "127.0.0.1:0"}
    response = api(toxiproxy_server, "POST", "/proxies", json=body)
    assert response.status_code == 201
    created = response.json()
    assert {"name", "listen", "upstream", "enabled", "toxics"} <= set(created)
    assert created["enabled"] is True


def test_create_can_start_a_proxy_disabled(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    proxy = toxiproxy_server.create_proxy(name, upstream.address, enabled=False)
    assert proxy.enabled is False
    assert toxiproxy_server.get_proxy(name).enabled is False


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"upstream": "127.0.0.1:1"}, "missing required field: name"),
        ({"name": "harness_test_no_upstream"}, "missing required field: upstream"),
    ],
)
def test_create_without_a_required_field_is_a_400_naming_it(
    toxiproxy_server: ToxiproxyClient, body: dict[str, str], message: str
) -> None:
    response = api(toxiproxy_server, "POST", "/proxies", json=body)
    assert response.status_code == 400
    assert error_of(response) == message


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2", b"not json"])
def test_create_with_a_body_that_is_not_json_is_a_400_bad_request_body(
    toxiproxy_server: ToxiproxyClient, raw: bytes
) -> None:
    response = api(toxiproxy_server, "POST", "/proxies", data=raw)
    assert response.status_code == 400
    assert error_of(response).startswith("bad request body")


def test_create_with_a_taken_name_is_a_409(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    body = {"name": name, "upstream": upstream.address, "listen": "127.0.0.1:0"}
    response = api(toxiproxy_server, "POST", "/proxies", json=body)
    assert response.status_code == 409
    assert error_of(response) == "proxy already exists"


def test_create_on_a_port_in_use_is_a_500_with_the_bind_error_and_creates_nothing(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient, name: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        body = {"name": name, "upstream": "127.0.0.1:1", "listen": f"127.0.0.1:{port}"}
        response = api(toxiproxy_server, "POST", "/proxies", json=body)
        assert response.status_code == 500
        assert "address already in use" in error_of(response)
        with pytest.raises(KeyError, match="name"):  # toxiproxy-python's quirk on a 500
            legacy.create(upstream="127.0.0.1:1", name=name, listen=f"127.0.0.1:{port}")
    assert name not in toxiproxy_server.proxies()


def test_a_second_proxy_on_the_listen_address_of_another_is_a_500_and_creates_nothing(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    first = toxiproxy_server.create_proxy(name, upstream.address)
    host, port = first.listen_address
    body = {"name": f"{name}_2", "upstream": upstream.address, "listen": f"{host}:{port}"}
    response = api(toxiproxy_server, "POST", "/proxies", json=body)
    assert response.status_code == 500
    assert "address already in use" in error_of(response)
    assert f"{name}_2" not in toxiproxy_server.proxies()
    with connect(first.listen_address) as sock:  # the first still owns the port alone
        sock.sendall(b"ping")
        assert sock.recv(4) == b"ping"


def test_unknown_proxy_is_a_404_for_every_verb(toxiproxy_server: ToxiproxyClient) -> None:
    for method, path in [
        ("GET", "/proxies/harness_test_absent"),
        ("POST", "/proxies/harness_test_absent"),
        ("DELETE", "/proxies/harness_test_absent"),
        ("GET", "/proxies/harness_test_absent/toxics"),
        ("POST", "/proxies/harness_test_absent/toxics"),
    ]:
        response = api(toxiproxy_server, method, path, json={"type": "noop"})
        assert response.status_code == 404, (method, path)
        assert error_of(response) == "proxy not found"


def test_delete_answers_204_then_404(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    proxy = legacy.create(upstream=upstream.address, name="harness_test_delete_me")
    assert api(toxiproxy_server, "DELETE", "/proxies/harness_test_delete_me").status_code == 204
    assert proxy.name not in legacy.proxies()
    with pytest.raises(toxiproxy.exceptions.NotFound, match="proxy not found"):
        proxy.destroy()


def test_disable_refuses_new_connections_and_enable_restores_them(
    legacy: toxiproxy.Toxiproxy, upstream: UpstreamServer, name: str
) -> None:
    proxy = legacy.create(upstream=upstream.address, name=name)
    host, port = proxy.listen.rsplit(":", 1)
    with proxy.down():
        assert legacy.get_proxy(name).enabled is False
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((host, int(port)), timeout=5)
    assert legacy.get_proxy(name).enabled is True
    with connect((host, int(port))) as sock:
        sock.sendall(b"back")
        assert sock.recv(4) == b"back"


def test_update_accepts_post_and_patch_and_keeps_omitted_fields(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    created = toxiproxy_server.create_proxy(name, upstream.address)
    response = api(toxiproxy_server, "PATCH", f"/proxies/{name}", json={"enabled": False})
    assert response.status_code == 200
    assert response.json()["upstream"] == upstream.address
    assert response.json()["enabled"] is False
    body = {"listen": "127.0.0.1:0", "enabled": True}
    moved = api(toxiproxy_server, "POST", f"/proxies/{name}", json=body).json()
    assert moved["enabled"] is True and moved["listen"] != created.listen
    host, port = moved["listen"].rsplit(":", 1)
    with connect((host, int(port))) as sock:
        sock.sendall(b"moved")
        assert sock.recv(5) == b"moved"


def test_toxics_are_added_listed_and_removed_with_toxiproxy_status_codes(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    proxy = legacy.create(upstream=upstream.address, name="harness_test_toxics")
    assert proxy.add_toxic(type="latency", attributes={"latency": 5}) is None  # quirk
    body = {"type": "slicer", "stream": "upstream", "attributes": {"average_size": 8}}
    response = api(toxiproxy_server, "POST", "/proxies/harness_test_toxics/toxics", json=body)
    assert response.status_code == 200
    assert response.json()["name"] == "slicer_upstream"
    assert response.json()["toxicity"] == 1
    listed = api(toxiproxy_server, "GET", "/proxies/harness_test_toxics/toxics").json()
    assert [t["name"] for t in listed] == ["slicer_upstream", "latency_downstream"]
    assert set(proxy.toxics()) == {"slicer_upstream", "latency_downstream"}
    assert proxy.get_toxic("latency_downstream").attributes == {"latency": 5, "jitter": 0}
    assert proxy.destroy_toxic("latency_downstream") is True
    path = "/proxies/harness_test_toxics/toxics/latency_downstream"
    assert api(toxiproxy_server, "GET", path).status_code == 404
    assert error_of(api(toxiproxy_server, "DELETE", path)) == "toxic not found"


def test_toxic_errors_are_400_invalid_and_409_duplicate_across_streams(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    proxy = legacy.create(upstream=upstream.address, name="harness_test_toxic_errors")
    path = "/proxies/harness_test_toxic_errors/toxics"
    bad_stream = api(toxiproxy_server, "POST", path, json={"type": "noop", "stream": "sideways"})
    assert bad_stream.status_code == 400
    assert error_of(bad_stream) == "stream was invalid, can be either upstream or downstream"
    bad_type = api(toxiproxy_server, "POST", path, json={"type": "gremlins"})
    assert (bad_type.status_code, error_of(bad_type)) == (400, "invalid toxic type")
    with pytest.raises(toxiproxy.exceptions.InvalidToxic, match="invalid toxic type"):
        proxy.add_toxic(type="gremlins")
    proxy.add_toxic(type="noop", name="shared", stream="upstream")
    with pytest.raises(toxiproxy.exceptions.ProxyExists, match="toxic already exists"):
        proxy.add_toxic(type="noop", name="shared", stream="downstream")
    proxy.add_toxic(type="noop", stream="downstream")  # default names differ per stream
    proxy.add_toxic(type="noop", stream="upstream")


def test_toxic_update_changes_only_attributes_and_toxicity(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    toxiproxy_server.add_toxic(name, "latency", attributes={"latency": 100, "jitter": 10})
    path = f"/proxies/{name}/toxics/latency_downstream"
    body = {"attributes": {"jitter": 3}, "toxicity": 0.5, "type": "timeout", "stream": "upstream"}
    response = api(toxiproxy_server, "PATCH", path, json=body)
    assert response.status_code == 200
    updated = response.json()
    assert (updated["type"], updated["stream"]) == ("latency", "downstream")
    assert updated["attributes"] == {"latency": 100, "jitter": 3}
    assert updated["toxicity"] == 0.5
    assert toxiproxy_server.get_toxic(name, "latency_downstream").attributes["jitter"] == 3


def test_reset_enables_every_proxy_and_removes_every_toxic(
    legacy: toxiproxy.Toxiproxy, toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer
) -> None:
    proxy = legacy.create(upstream=upstream.address, name="harness_test_reset")
    proxy.add_toxic(type="latency", attributes={"latency": 10})
    proxy.disable()
    assert api(toxiproxy_server, "POST", "/reset").status_code == 204
    after = toxiproxy_server.get_proxy("harness_test_reset")
    assert after.enabled is True
    assert after.toxics == ()


def test_populate_creates_proxies_and_returns_them_under_proxies(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    entries = [{"name": name, "upstream": upstream.address, "listen": "127.0.0.1:0"}]
    response = api(toxiproxy_server, "POST", "/populate", json=entries)
    assert response.status_code == 201
    (created,) = response.json()["proxies"]
    assert created["name"] == name and created["enabled"] is True


def test_populate_leaves_an_identical_existing_proxy_and_its_toxics_alone(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    proxy = toxiproxy_server.create_proxy(name, upstream.address)
    toxiproxy_server.add_toxic(name, "noop")
    again = toxiproxy_server.populate(
        [{"name": name, "upstream": upstream.address, "listen": proxy.listen}]
    )
    assert again[0].listen == proxy.listen
    assert [t.name for t in toxiproxy_server.get_proxy(name).toxics] == ["noop_downstream"]


def test_populate_with_a_nameless_entry_is_a_400_and_creates_nothing(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    entries = [{"name": name, "upstream": upstream.address}, {"upstream": upstream.address}]
    response = api(toxiproxy_server, "POST", "/populate", json=entries)
    assert response.status_code == 400
    assert response.json()["error"] == "missing required field: name at proxy 2"
    assert name not in toxiproxy_server.proxies()


def test_populate_stops_at_a_bind_error_keeping_the_entries_before_it(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        entries = [
            {"name": f"{name}_1", "upstream": upstream.address, "listen": "127.0.0.1:0"},
            {"name": f"{name}_2", "upstream": upstream.address, "listen": f"127.0.0.1:{port}"},
            {"name": f"{name}_3", "upstream": upstream.address, "listen": "127.0.0.1:0"},
        ]
        response = api(toxiproxy_server, "POST", "/populate", json=entries)
    assert response.status_code == 500
    assert "address already in use" in response.json()["error"]
    names = set(toxiproxy_server.proxies())
    assert f"{name}_1" in names
    assert not {f"{name}_2", f"{name}_3"} & names


def test_browsers_get_403_and_every_response_carries_a_request_id(
    toxiproxy_server: ToxiproxyClient,
) -> None:
    browser = api(toxiproxy_server, "GET", "/proxies", headers={"User-Agent": "Mozilla/5.0"})
    assert browser.status_code == 403
    assert browser.text.strip() == "User agent not allowed"
    assert api(toxiproxy_server, "GET", "/version").headers["X-Toxiproxy-Request-Id"]


@pytest.mark.parametrize(
    ("method", "path", "raw"),
    [
        ("POST", "/proxies", b"[]"),
        ("POST", "/proxies", b'{"name": 5, "upstream": "x:1"}'),
        ("POST", "/proxies", b'{"name": "harness_test_bad", "upstream": "x:1", "enabled": 3}'),
        ("POST", "/populate", b'{"not": "a list"}'),
        ("POST", "/populate", b"[5]"),
        ("POST", "/proxies/{name}", b'"text"'),
        ("POST", "/proxies/{name}/toxics", b'{"type": "latency", "attributes": []}'),
        ("POST", "/proxies/{name}/toxics", b'{"type": "latency", "toxicity": "x"}'),
        ("POST", "/proxies/{name}/toxics", b"\xff\xfe"),
    ],
)
def test_bad_input_gets_a_4xx_and_never_takes_the_server_down(
    toxiproxy_server: ToxiproxyClient,
    upstream: UpstreamServer,
    name: str,
    method: str,
    path: str,
    raw: bytes,
) -> None:
    toxiproxy_server.create_proxy(name, upstream.address)
    response = api(toxiproxy_server, method, path.format(name=name), data=raw)
    assert 400 <= response.status_code < 500
    assert toxiproxy_server.version().startswith("2.")
