"""The plugin's fixtures: ``toxiproxy`` (a typed client on a fault proxy), ``rdzv_store`` (a
live TCPStore master) and ``harness_cluster`` (runs a scenario built in Python, returns its
report)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from harness.pytest_plugin.options import overrides, seed_override
from harness.pytest_plugin.session import proxies, real_toxiproxy, session_for

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
    from harness.run.proxies import embedded_proxy

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

    It runs as a scenario item does (:func:`harness.run.one.run_one`): a scenario its
    backend or world cannot run skips the test with the reason, and a failure of the
    harness itself comes back as the report's ``error`` (the report fails).

    The factory raises:
        ScenarioError: the scenario is invalid (names each bad key).
        HarnessError: the world's session (Ray) could not be opened.
    """
    config = request.config
    test = _NAME_JUNK.sub("-", request.node.name.lower()).strip("-._") or "test"

    def run(scenario: Mapping[str, Any] | None = None, /, **fields: Any) -> Report:
        from harness.run.seed import choose_seed, fresh_seed
        from harness.scenario.load import parse

        data: dict[str, Any] = {"name": test, "description": f"built by {request.node.nodeid}"}
        data.update(overrides(config))
        data.update(scenario or {})
        data.update(fields)
        built = parse(data, f"<{request.node.nodeid}>")
        override, _ = seed_override(config)
        seed = choose_seed(built, override, fresh_seed)
        return _run_built(built, seed, config)

    return run


def _run_built(scenario: Scenario, seed: int, config: pytest.Config) -> Report:
    """Run ``scenario`` as a scenario item runs: admitted by the registry (its backend, its
    world), the harness's own failures turned into a report; a scenario that is not
    admitted skips the test, saying why."""
    from harness.run.one import run_one

    session_for(config, scenario)
    report = run_one(scenario, proxies(config), seed)
    if report.skipped is not None:
        pytest.skip(report.skip_reason or report.skipped)
    return report
