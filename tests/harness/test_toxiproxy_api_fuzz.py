"""Random bodies on every route never take the embedded server down (hypothesis)."""

from __future__ import annotations

import json

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proxy_helpers import UpstreamServer

from harness.proxy.api import ToxiproxyServer

ROUTES = [
    ("POST", "/proxies"),
    ("POST", "/populate"),
    ("POST", "/proxies/fuzzed"),
    ("PATCH", "/proxies/fuzzed"),
    ("POST", "/proxies/fuzzed/toxics"),
    ("POST", "/proxies/fuzzed/toxics/latency_downstream"),
    ("PATCH", "/proxies/fuzzed/toxics/latency_downstream"),
    ("POST", "/seed"),
]
KEYS = ["name", "listen", "upstream", "enabled", "type", "stream", "toxicity", "attributes"]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from([*KEYS, "latency", "rate", "bytes"]) | st.text(), inner)
    ),
    max_leaves=8,
)
BODIES = JSON.map(lambda value: json.dumps(value).encode()) | st.binary(max_size=64)


def test_random_bodies_get_json_errors_and_the_server_keeps_serving(
    upstream: UpstreamServer,
) -> None:
    with ToxiproxyServer(seed=5) as server:

        def reset_fixture() -> None:
            for name in requests.get(f"{server.url}/proxies", timeout=10).json():
                requests.delete(f"{server.url}/proxies/{name}", timeout=10)
            body = {"name": "fuzzed", "upstream": upstream.address, "listen": "127.0.0.1:0"}
            requests.post(f"{server.url}/proxies", json=body, timeout=10).raise_for_status()
            toxic = {"type": "latency", "attributes": {"latency": 1}}
            requests.post(f"{server.url}/proxies/fuzzed/toxics", json=toxic, timeout=10)

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(route=st.sampled_from(ROUTES), body=BODIES)
        def check(route: tuple[str, str], body: bytes) -> None:
            reset_fixture()
            method, path = route
            response = requests.request(method, server.url + path, data=body, timeout=10)
            assert response.status_code in {200, 201, 400, 404, 409, 500}, response.text
            if response.status_code >= 400:
                error = json.loads(response.text)["error"]
                assert not error.startswith("internal error"), error
            assert requests.get(f"{server.url}/version", timeout=10).status_code == 200

        check()
