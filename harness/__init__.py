"""harness: a fault-injection harness for rendezvous.

The layers, lowest first (each subpackage's docstring lists its modules and what it may
import; docs/architecture.md draws the picture and follows one scenario through it):

* ``errors``          the HarnessError tree (every layer may raise it)
* ``proxy``           the fault proxy: toxics, relay, proxies, the Toxiproxy API server and
                      the typed client; knows nothing of nodes or scenarios
* ``world``           where nodes run and how faults reach them: the ``World`` protocol and
                      ``LocalWorld`` (node processes, their network, squatters, DNS shim,
                      store-fault interposer); knows nothing of scenario files
* ``scenario``        the file format: models, fault kinds (each a class that acts through
                      a world), loading and validation
* ``run``             one run (schedule, record, heal), the checks, a suite of runs
* ``report``          console, JUnit and HTML reports of runs; nothing of how nodes run
* ``fuzz``            hypothesis strategies, the oracle, the fuzz loop
* ``logs``            reading failed start-ups' logs back into scenarios (``from-log``):
                      sans-IO line readers, inference, a validated scenario TOML
* ``cli``             ``harness run | list | fuzz | replay | proxy | from-log``
* ``pytest_plugin``   pytest11 entry point: scenario files as items, options, fixtures
* ``_launch``         the ``harness`` script: one line, exit 1, if the ``harness`` extra is
                      missing (rdzv itself installs with no dependencies); else ``cli``

``ToxiproxyServer`` and ``ToxiproxyClient`` are importable from here; they are loaded on
first use so that processes which never touch the proxy do not import aiohttp/requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.errors import (
    AlreadyExistsError,
    HarnessError,
    InvalidRequestError,
    NotFoundError,
    ProxyApiError,
    ProxyStartError,
    ScenarioError,
    ToxiproxyProtocolError,
    ToxiproxyTimeoutError,
    ToxiproxyUnreachableError,
)

if TYPE_CHECKING:
    from harness.proxy.api import ToxiproxyServer
    from harness.proxy.client import ToxiproxyClient

__all__ = [
    "AlreadyExistsError",
    "HarnessError",
    "InvalidRequestError",
    "NotFoundError",
    "ProxyApiError",
    "ProxyStartError",
    "ScenarioError",
    "ToxiproxyClient",
    "ToxiproxyProtocolError",
    "ToxiproxyServer",
    "ToxiproxyTimeoutError",
    "ToxiproxyUnreachableError",
]


def __getattr__(name: str) -> Any:
    if name == "ToxiproxyServer":
        from harness.proxy.api import ToxiproxyServer

        return ToxiproxyServer
    if name == "ToxiproxyClient":
        from harness.proxy.client import ToxiproxyClient

        return ToxiproxyClient
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
