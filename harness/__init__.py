"""harness: a fault-injection harness for rendezvous.

Module map. The fault proxy (Toxiproxy's API and toxics):

* ``errors``           HarnessError tree (proxy API errors, ScenarioError)
* ``toxics``           pure toxic logic with Toxiproxy's names, attributes and semantics
* ``events``           the fault proxy's bounded event log (which toxic acted, when)
* ``netaddr``          ``host:port`` parsing and listening sockets, with Go-style errors
* ``relay``            one proxied connection: two sockets, two links, toxic stages
* ``proxy``            proxies and their collection: listeners, chains, seed, event log
* ``loop``             the proxy's event loop (stdlib asyncio, sub-millisecond timers)
* ``toxiproxy_api``    the Toxiproxy-compatible HTTP control plane; ``ToxiproxyServer``
* ``toxiproxy_client`` one typed client over toxiproxy-python, whichever server is behind it

Running scenarios (data flows down this list):

* ``faults``           the fault kinds of the format, as validated models
* ``scenario``         TOML -> validated, frozen models; errors name file and key
* ``consistency``      checks that need the whole file (node indexes, faults that cannot act)
* ``explain``          pydantic's errors in the format's words: key path, bad value, allowed
* ``squatters``        bind faults: listeners holding node 0's port in five ways
* ``store_faults``     store-level faults: an interposer that decodes TCPStore requests
* ``topology``         one run's network: node 0's port, proxy links, DNS shim, interposer
* ``backends``         the rendezvous a node runs: rdzv static, torch-static, module:factory
* ``node``             the node process: one rendezvous, events, one outcome
* ``cluster``          start / signal / watch / end node processes (forkserver)
* ``runner``           one scenario, one seed: schedule faults, gather outcomes
* ``checks``           invariants and expectations -> violations
* ``model``            events, outcomes, fault records, violations, reports
* ``suite``            many scenarios on a thread pool, one embedded proxy per run
* ``report``, ``report_html``, ``timeline``, ``glyphs``  console, JUnit and HTML reports
* ``cli``, ``cli_run``, ``cli_fuzz``  ``harness proxy | run | list | fuzz | replay``
* ``_launch``          the ``harness`` script: one line, exit 1, if the ``harness`` extra is
                       missing (rdzv itself installs with no dependencies); else ``cli``

Fuzzing (hypothesis; imported only by ``harness fuzz | replay`` and property tests):

* ``strategies``       hypothesis strategies: endpoints, fault schedules, whole scenarios
* ``oracle``           a scenario's faults -> the outcomes rdzv must report (its ``expect``)
* ``fuzz``             the fuzz loop: run, shrink, write the minimal failing scenario; replay
* ``pytest_plugin``    pytest11 entry point: scenario files as items, options, fixtures

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
    from harness.toxiproxy_api import ToxiproxyServer
    from harness.toxiproxy_client import ToxiproxyClient

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
        from harness.toxiproxy_api import ToxiproxyServer

        return ToxiproxyServer
    if name == "ToxiproxyClient":
        from harness.toxiproxy_client import ToxiproxyClient

        return ToxiproxyClient
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
