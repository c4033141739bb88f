"""pytest plugin: scenario files as test items, the harness's options, and its fixtures.

Registered as the ``pytest11`` entry point ``harness`` (active once the package is
installed; otherwise pass ``-p harness.pytest_plugin``). See docs/pytest.md. This package
registers its modules as plugins of their own (``pytest_plugins``); it defines no hook and
no fixture itself, so none is registered twice.

* Every file matching the ini glob ``harness_scenarios`` (default ``scenarios/**/*.toml``,
  relative to the rootdir), and any ``.toml`` file named on the command line, is collected
  as one item per file, marked ``harness_scenario``.
  An invalid file is a collection error naming the file and its bad keys; a failing item
  shows the failed checks, each node's outcome, the seed and the command that replays it.
* Options (group "harness"), each with an ini twin: ``--harness-seed`` / ``harness_seed``,
  ``--toxiproxy`` / ``harness_toxiproxy``, ``--harness-report`` / ``harness_report``,
  ``--harness-backend`` / ``harness_backend`` (run every scenario on that backend; a
  scenario it cannot run on — ``[backends.<name>] unsupported``, torch missing — is skipped
  with the reason), ``--harness-pack`` / ``harness_pack`` (run every scenario with its nodes
  packed K per process as threads, see docs/scenarios.md "Packed nodes"),
  ``--harness-world`` / ``harness_world`` (run every scenario in that world: ``local`` or
  ``netns`` or ``ray``; a scenario the world cannot carry out is skipped with the reason)
  and ``--harness-ray-address`` / ``harness_ray_address`` (the Ray cluster of the ray
  world; default a local Ray bound to 127.0.0.1, started once for the session at the first
  scenario that needs it and stopped at the end, see docs/cluster.md).
* Fixtures: ``toxiproxy`` (a typed client on a fault proxy), ``rdzv_store`` (a live TCPStore
  master), ``harness_cluster`` (runs a scenario built in Python, returns its report).

Modules, each a plugin:

* ``options``    the options and ini keys: declared, read, validated, the report header
* ``session``    what the session's runs share: the proxy, the Ray connection
* ``items``      collection: scenario files as items, a failed run's text
* ``reports``    JUnit and HTML reports of the items at the end of the session
* ``fixtures``   ``toxiproxy``, ``rdzv_store``, ``harness_cluster``

Imports: the top of the harness, it may import ``_launch``, ``errors``, ``proxy``,
``world``, ``scenario``, ``run`` and ``report``; nothing imports it. Only pytest and the
standard library are imported at start-up: the runner, aiohttp, multiprocess and pydantic
are imported when a scenario file is collected or run, or a fixture is used, so the plugin
costs nothing in unrelated test runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.pytest_plugin.fixtures import HarnessCluster
    from harness.pytest_plugin.items import ScenarioFailed, ScenarioFile, ScenarioItem
    from harness.pytest_plugin.options import parse_toxiproxy_address

__all__ = [
    "HarnessCluster",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "parse_toxiproxy_address",
]

#: Where each public name lives. They are imported on first use, not here: pytest imports
#: the modules below as plugins (``pytest_plugins``) and rewrites their asserts only if it
#: is the first to import them (else it warns "Module already imported so cannot be
#: rewritten" once per module and process).
_HOMES = {
    "HarnessCluster": "fixtures",
    "ScenarioFailed": "items",
    "ScenarioFile": "items",
    "ScenarioItem": "items",
    "parse_toxiproxy_address": "options",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


pytest_plugins = (
    "harness.pytest_plugin.options",
    "harness.pytest_plugin.session",
    "harness.pytest_plugin.items",
    "harness.pytest_plugin.reports",
    "harness.pytest_plugin.fixtures",
)
