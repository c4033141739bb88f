"""Run one scenario as a suite, the fuzzer and the pytest plugin do: admitted, then run.

:func:`run_one` never raises because the scenario went wrong: a scenario the registry does
not admit (:func:`harness.run.worlds.admit`) comes back skipped, saying why; a run that
raised comes back as a failed :class:`~harness.run.model.Report` whose ``error`` holds the
traceback, so it still shows its seed and replay command.
"""

from __future__ import annotations

import contextlib
import threading
import time
from contextlib import AbstractContextManager

from harness.errors import UnsupportedError
from harness.proxy.client import ToxiproxyClient
from harness.run.crash import failure_line
from harness.run.model import Report
from harness.run.proxies import ProxyProvider
from harness.run.runner import run_scenario
from harness.run.worlds import admit
from harness.scenario.model import Scenario
from harness.world.process.backends import rerun_env

__all__ = ["run_one"]


def run_one(
    scenario: Scenario,
    proxies: ProxyProvider,
    seed: int,
    stop: threading.Event | None = None,
) -> Report:
    """Run one scenario with ``seed`` in the world it names (the local world by default,
    packed when it says ``pack``), its links on the proxy ``proxies`` gives when that
    world's links are on the run's proxy (no proxy is started for another world).

    A run that raises becomes a failed report; a scenario its backend cannot run
    (``[backends.<name>] unsupported``, or torch missing) or its world cannot carry out (a
    fault needs what the world lacks, or the world cannot run here) a skipped one. Setting
    ``stop`` ends the run at once: its nodes are killed, its proxies removed, and the
    report comes back ``interrupted``.

    ``KeyboardInterrupt`` and other ``BaseException`` subclasses that are not ``Exception``
    still propagate (after the runner has cleaned up its processes).
    """
    report = _run_one(scenario, proxies, seed, stop)
    report.rerun_env = rerun_env(scenario.backend)
    return report


def _run_one(
    scenario: Scenario, proxies: ProxyProvider, seed: int, stop: threading.Event | None
) -> Report:
    admitted = admit(scenario)
    if admitted.skipped is not None:
        return Report(
            scenario,
            seed,
            outcomes=[],
            skipped=admitted.skipped,
            skipped_by_world=admitted.by_world,
        )
    kind = admitted.kind
    began = time.monotonic()
    proxy: AbstractContextManager[ToxiproxyClient | None] = (
        proxies() if kind.proxied else contextlib.nullcontext(None)
    )
    try:
        with proxy as client:
            return run_scenario(scenario, kind.make(scenario.pack, client), seed, stop)
    except UnsupportedError as exc:
        return Report(scenario, seed, outcomes=[], skipped=str(exc), skipped_by_world=exc.world)
    except Exception as exc:
        return Report(
            scenario,
            seed,
            outcomes=[],
            duration=time.monotonic() - began,
            error=failure_line(exc, scenario.name, scenario.backend),
        )
