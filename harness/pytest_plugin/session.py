"""What the session's scenario runs share: the proxy, and the Ray connection.

The proxy is a real Toxiproxy (``--toxiproxy``) shared by every run, asked for its version
once (a server that cannot be used fails each test that needs it with one line), else a
fresh embedded one per run. The ray world's connection is made once for the session, at the
first scenario that needs it, and closed when pytest unconfigures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from harness.pytest_plugin.options import ray_address, toxiproxy_address

if TYPE_CHECKING:
    from harness.proxy.client import ToxiproxyClient
    from harness.scenario.model import Scenario

__all__ = ["RAY", "proxies", "pytest_unconfigure", "ray_for", "real_toxiproxy"]

RAY = pytest.StashKey[Any]()  # the session's Ray connection (a RaySession)
#: Why the --toxiproxy server cannot be used ("" once it answered), asked once a session.
_CHECKED = pytest.StashKey[str]()


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


def real_toxiproxy(config: pytest.Config) -> ToxiproxyClient | None:
    """A client on the ``--toxiproxy`` server (None: none was given). The server is asked
    for its version once per session; when that fails, every test that needs it fails with
    one line saying what was tried and what happened, not the HTTP library's traceback."""
    from harness.errors import HarnessError
    from harness.proxy.client import ToxiproxyClient

    address = toxiproxy_address(config)
    if address is None:
        return None
    client = ToxiproxyClient(*address)
    if _CHECKED not in config.stash:
        where = "--toxiproxy" if config.getoption("harness_toxiproxy") else "ini harness_toxiproxy"
        try:
            client.version()
            config.stash[_CHECKED] = ""
        except HarnessError as exc:
            config.stash[_CHECKED] = f"{where}: {exc}"
    if config.stash[_CHECKED]:
        pytest.fail(config.stash[_CHECKED], pytrace=False)
    return client


def proxies(config: pytest.Config) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """What gives each run its proxy client (see the module doc).

    Raises:
        pytest.fail.Exception: the ``--toxiproxy`` server cannot be used (one line).
    """
    from harness.run.suite import embedded_proxy, shared_proxy

    client = real_toxiproxy(config)
    return embedded_proxy if client is None else shared_proxy(client)
