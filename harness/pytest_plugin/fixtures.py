"""The plugin's fixtures: ``toxiproxy`` (a typed client on a fault proxy), ``rdzv_store`` (a
live TCPStore master) and ``harness_cluster`` (runs a scenario built in Python, returns its
report)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from harness.pytest_plugin.options import overrides, seed_override
from harness.pytest_plugin.session import proxies, ray_for, real_toxiproxy

if TYPE_CHECKING:
    from harness.proxy.client import ToxiproxyClient
    from harness.run.model import Report
    from harness.scenario.model import Scenario
    from rdzv import TCPStore

__all__ = ["HarnessCluster", "harness_cluster", "rdzv_store", "toxiproxy"]

#: ``harness_cluster(...)``: a scenario built in Python (mapping and/or keywords) -> Report.
HarnessCluster = Callable[..., "Report"]


@pytest.fixture
def toxiproxy(pytestconfig: pytest.Config) -> Iterator[ToxiproxyClient]:
    """A typed Toxiproxy client: on the ``--toxiproxy`` server, else a fresh embedded one
    (stopped after the test)."""
    client = real_toxiproxy(pytestconfig)
    if client is not None:
        yield client
        return
    from harness.run.suite import embedded_proxy

    with embedded_proxy() as client:
        yield client


@pytest.fixture
def rdzv_store() -> Iterator[TCPStore]:
    """A live rdzv TCPStore master on 127.0.0.1 (port 0; read ``.port``), closed after."""
    from rdzv import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=30)
    try:
        yield store
    finally:
        store.close()


_NAME_JUNK = re.compile(r"[^a-z0-9._-]+")


@pytest.fixture
def harness_cluster(request: pytest.FixtureRequest) -> HarnessCluster:
    """Run a scenario built in Python and return its :class:`~harness.run.model.Report`.

    Call it with a mapping and/or keyword arguments in the scenario file's shape, e.g.
    ``harness_cluster(nodes=3, fault=[{"kind": "absent", "nodes": [2]}], timeouts=...)``;
    ``name`` and ``description`` default to the test's, ``backend`` to
    ``--harness-backend`` when given. The seed is ``--harness-seed`` when
    given, else the scenario's ``seed`` key, else a fresh one. Each call runs to the end and
    cleans up its processes and proxies, also when it raises.

    The factory raises:
        ScenarioError: the scenario is invalid (names each bad key).
        UnsupportedError: a fault needs what the local world cannot do (nothing ran).
        HarnessError: the proxy could not be started or reached.
    """
    config = request.config
    test = _NAME_JUNK.sub("-", request.node.name.lower()).strip("-._") or "test"

    def run(scenario: Mapping[str, Any] | None = None, /, **fields: Any) -> Report:
        from harness.run.suite import choose_seed
        from harness.scenario.load import parse

        data: dict[str, Any] = {"name": test, "description": f"built by {request.node.nodeid}"}
        data.update(overrides(config))
        data.update(scenario or {})
        data.update(fields)
        built = parse(data, f"<{request.node.nodeid}>")
        override, _ = seed_override(config)
        seed = choose_seed(built, override, lambda: secrets.randbits(32))
        return _run_built(built, seed, config)

    return run


def _run_built(scenario: Scenario, seed: int, config: pytest.Config) -> Report:
    from harness.run.runner import run_scenario
    from harness.run.worlds import worlds_for

    ray_for(config, scenario)
    with proxies(config)() as client:
        report: Report = run_scenario(scenario, worlds_for(scenario, client), seed)
    return report
