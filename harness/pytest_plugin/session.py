"""What the session's scenario runs share: the proxy, and the worlds' sessions (Ray).

The proxy is a real Toxiproxy (``--toxiproxy``) shared by every run, asked for its version
once (a server that cannot be used fails each test that needs it with one line), else a
fresh embedded one per run (only for a world whose links are on the run's proxy). A world's
session (the ray world's connection) is opened once for the session, at the first scenario
that needs it, and closed when pytest unconfigures.
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

__all__ = ["SESSIONS", "proxies", "pytest_unconfigure", "real_toxiproxy", "session_for"]

SESSIONS = pytest.StashKey[dict[str, Any]]()  # the session's world sessions (Ray), by world
#: Why the --toxiproxy server cannot be used ("" once it answered), asked once a session.
_CHECKED = pytest.StashKey[str]()


def session_for(config: pytest.Config, scenario: Scenario) -> None:
    """Open the session of ``scenario``'s world once for the pytest session (Ray,
    connected at the first scenario in the ray world; closed in :func:`pytest_unconfigure`);
    the registry decides (:func:`harness.run.worlds.open_session`): a world that cannot run
    here opens none, and its scenarios are skipped saying why."""
    from harness.run.worlds import open_session

    sessions: dict[str, Any] = config.stash.setdefault(SESSIONS, {})
    open_session(scenario, ray_address(config), sessions)


def pytest_unconfigure(config: pytest.Config) -> None:
    for session in config.stash.get(SESSIONS, {}).values():
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
    from harness.run.proxies import embedded_proxy, shared_proxy

    client = real_toxiproxy(config)
    return embedded_proxy if client is None else shared_proxy(client)
