"""What the session's scenario runs share: the proxy, and the Ray connection.

The proxy is a real Toxiproxy (``--toxiproxy``) shared by every run, else a fresh embedded
one per run. The ray world's connection is made once for the session, at the first scenario
that needs it, and closed when pytest unconfigures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from harness.pytest_plugin.options import ray_address, toxiproxy_address

if TYPE_CHECKING:
    from harness.scenario.model import Scenario

__all__ = ["RAY", "proxies", "pytest_unconfigure", "ray_for"]

RAY = pytest.StashKey[Any]()  # the session's Ray connection (a RaySession)


def ray_for(config: pytest.Config, scenario: Scenario) -> None:
    """Connect to Ray once for the session when ``scenario`` runs in the ray world (closed
    in :func:`pytest_unconfigure`); without Ray installed the run is skipped with the
    install command instead."""
    if scenario.world != "ray" or RAY in config.stash:
        return
    from harness.world.ray.session import connect, unavailable

    if unavailable() is None:
        config.stash[RAY] = connect(ray_address(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(RAY, None)
    if session is not None:
        session.close()


def proxies(config: pytest.Config) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """What gives each run its proxy client (see the module doc)."""
    from harness.proxy.client import ToxiproxyClient
    from harness.run.suite import embedded_proxy, shared_proxy

    address = toxiproxy_address(config)
    if address is None:
        return embedded_proxy
    return shared_proxy(ToxiproxyClient(*address))
