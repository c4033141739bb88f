"""The Ray world's links past one proxy's share go to proxy processes its host's agent starts
(issue 29 §1: one agent could not hold 10,240 links). Ray itself is stood in for: the test
is about how the network shares the links out, not about Ray."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.world.base import ToxicSpec
from harness.world.ray.network import Agent, RayNetwork


class _Call:
    def __init__(self, result: Any) -> None:
        self.result = result


class _Method:
    def __init__(self, function: Any) -> None:
        self.function = function

    def remote(self, *args: Any) -> _Call:
        return _Call(self.function(*args))


class _AgentActor:
    """Stands in for a ProxyAgent actor: ``more`` starts in-process proxies."""

    def __init__(self) -> None:
        self.started: list[ToxiproxyServer] = []
        self.more = _Method(self._more)

    def _more(self, count: int) -> list[tuple[str, int]]:
        servers = [ToxiproxyServer(seed=1).start() for _ in range(count)]
        self.started += servers
        return [(s.host, s.port) for s in servers]


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("ray")
    module.get = lambda call, timeout=None: call.result  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", module)


@pytest.fixture
def agent() -> Iterator[tuple[Agent, _AgentActor]]:
    actor = _AgentActor()
    with ToxiproxyServer(seed=1) as server:
        try:
            yield Agent("host-a", actor, ToxiproxyClient(server.host, server.port)), actor
        finally:
            for started in actor.started:
                started.stop()


@pytest.mark.usefixtures("fake_ray")
def test_a_hosts_links_past_one_proxys_share_go_to_proxies_its_agent_starts(
    agent: tuple[Agent, _AgentActor],
) -> None:
    host, actor = agent
    network = RayNetwork("run", {"host-a": host}, links_per_proxy=2)
    network.connect(dict.fromkeys(range(1, 6), "host-a"), ("127.0.0.1", 9))

    assert len(actor.started) == 2  # nodes 1-2 on the agent, 3-4 and 5 on two more
    assert {p for p in host.client.proxies()} == {"run-node1", "run-node2"}
    on = {node: network.links[node][0] for node in range(1, 6)}
    assert on[3] is on[4] and on[3] is not on[5] and on[5] is not host.client
    assert set(on[5].proxies()) == {"run-node5"}
    assert sorted(network.ports) == [1, 2, 3, 4, 5]

    toxic = ToxicSpec(name="slow", type="latency", attributes={"latency": 5})
    network.add_toxic([2, 5], toxic)
    assert [t.name for t in host.client.toxics("run-node2")] == ["slow"]
    assert [t.name for t in on[5].toxics("run-node5")] == ["slow"]
    network.hold(4, "pause", 1000)
    assert {t.name for t in on[4].toxics("run-node4")} == {"pause-upstream", "pause-downstream"}
