"""Run many scenarios: pick each one's seed, run them on a thread pool, collect reports.

This is the orchestration behind ``harness run`` (and anything else that wants a whole
suite): it never raises because one scenario went wrong. A scenario whose run raised comes
back as a :class:`~harness.run.model.Report` whose ``error`` holds the traceback, so it counts
as failed and still shows its seed and replay command.

Ctrl-C (``KeyboardInterrupt`` in the main thread) stops the suite promptly: scenarios not
yet started are cancelled, running ones are told to stop (their nodes are killed by PID
and their proxies torn down at once, without waiting for the run to end) and come back
marked ``interrupted``; :class:`SuiteInterrupted` then carries every report there is.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import AbstractContextManager
from types import FrameType
from typing import Literal

from harness.errors import HarnessError, UnsupportedError
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.run.budget import Budget, auto_jobs, capacity, cost
from harness.run.model import Report
from harness.run.runner import run_scenario
from harness.run.worlds import worlds_for
from harness.scenario.model import Scenario
from harness.world.process.backends import rerun_env, unavailable

__all__ = [
    "ProxyProvider",
    "SuiteInterrupted",
    "WorldUnreachable",
    "choose_seed",
    "embedded_proxy",
    "run_one",
    "run_suite",
    "shared_proxy",
    "worlds_session",
]

#: Gives each scenario run the Toxiproxy API it drives, for the duration of the run.
ProxyProvider = Callable[[], AbstractContextManager[ToxiproxyClient]]


@contextlib.contextmanager
def embedded_proxy() -> Iterator[ToxiproxyClient]:
    """A fresh embedded Toxiproxy-API server for one run: its seed (set by the run) then
    governs that run's toxics alone, however many scenarios run at once."""
    with ToxiproxyServer() as server:
        yield ToxiproxyClient(server.host, server.port)


def shared_proxy(client: ToxiproxyClient) -> ProxyProvider:
    """Every run drives ``client``'s server (a real Toxiproxy: its seed does nothing)."""
    return lambda: contextlib.nullcontext(client)


class WorldUnreachable(HarnessError):
    """The world scenarios asked for could not be reached (Ray not started or joined)."""


@contextlib.contextmanager
def worlds_session(scenarios: Sequence[Scenario], ray_address: str | None) -> Iterator[None]:
    """What the scenarios' worlds need for a whole suite: Ray, connected once (not per
    scenario) when one runs in the ray world -- a local Ray started here is stopped at the
    end, also on Ctrl-C.

    Without Ray installed there is nothing to connect: each scenario of the ray world is
    then reported skipped by :func:`run_one`, with the install command, and the others run.

    Raises:
        WorldUnreachable: Ray could not be started, or its cluster joined.
    """
    if not any(sc.world == "ray" for sc in scenarios):
        yield
        return
    from harness.world.ray.session import connect, unavailable

    if unavailable() is not None:  # run_one reports each ray scenario skipped, saying why
        yield
        return
    try:
        session = connect(ray_address)
    except HarnessError as exc:
        raise WorldUnreachable(f"--world ray: {exc}") from exc
    try:
        yield
    finally:
        session.close()


class SuiteInterrupted(KeyboardInterrupt):
    """The suite was interrupted (Ctrl-C) and has stopped, its processes and proxies gone.

    Attributes:
        reports: in input order, the scenarios that ended before the interruption and
            those it stopped (``interrupted`` set); scenarios never started are not in it.
    """

    def __init__(self, reports: Sequence[Report]) -> None:
        super().__init__("interrupted")
        self.reports = list(reports)


#: Called with a scenario when a worker starts it, and with its report when it ends.
OnStart = Callable[[Scenario], None]
OnResult = Callable[[Report], None]


def choose_seed(scenario: Scenario, override: int | None, fresh: Callable[[], int]) -> int:
    """The seed a run uses: the override, else the scenario's own, else ``fresh()``."""
    if override is not None:
        return override
    if scenario.seed is not None:
        return scenario.seed
    return fresh()


def run_one(
    scenario: Scenario,
    proxies: ProxyProvider,
    seed: int,
    stop: threading.Event | None = None,
) -> Report:
    """Run one scenario with ``seed`` in the local world (packed when the scenario says
    ``pack``), its links on the proxy ``proxies``
    gives; a run that raises becomes a failed report, and a scenario its backend cannot run
    (``[backends.<name>] unsupported``, or torch missing) or its world cannot carry out (a
    fault needs what the world lacks) a skipped one. Setting ``stop`` ends the run at once:
    its nodes are killed, its proxies removed, and the report comes back ``interrupted``.

    ``KeyboardInterrupt`` and other ``BaseException`` subclasses that are not ``Exception``
    still propagate (after the runner has cleaned up its processes).
    """
    report = _run_one(scenario, proxies, seed, stop)
    report.rerun_env = rerun_env(scenario.backend)
    return report


def _run_one(
    scenario: Scenario, proxies: ProxyProvider, seed: int, stop: threading.Event | None
) -> Report:
    why_not = scenario.variant.unsupported or unavailable(scenario.backend)
    if why_not is not None:
        return Report(scenario, seed, outcomes=[], skipped=why_not)
    began = time.monotonic()
    try:
        with proxies() as client:
            return run_scenario(scenario, worlds_for(scenario, client), seed, stop)
    except UnsupportedError as exc:
        return Report(scenario, seed, outcomes=[], skipped=str(exc), skipped_by_world=exc.world)
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)).rstrip()
        return Report(
            scenario,
            seed,
            outcomes=[],
            duration=time.monotonic() - began,
            error=f"the harness failed while running the scenario:\n{detail}",
        )


def run_suite(
    scenarios: Sequence[Scenario],
    proxies: ProxyProvider = embedded_proxy,
    jobs: int | Literal["auto"] = 1,
    seed: int | None = None,
    on_result: OnResult | None = None,
    on_start: OnStart | None = None,
) -> list[Report]:
    """Run every scenario, ``jobs`` at a time, and return their reports in input order.

    Args:
        scenarios: the scenarios to run (e.g. from :func:`harness.scenario.model.load_many`).
        proxies: gives each run its Toxiproxy API: :func:`embedded_proxy` (default, one
            fresh embedded server per run) or :func:`shared_proxy` (a real server).
        jobs: how many scenarios run at once at most (each in its own thread, with its own
            nodes); ``"auto"``: one per core (:func:`~harness.run.budget.auto_jobs`).
            Whatever ``jobs`` says, a scenario starts only when it fits beside the running
            ones in what the machine holds (:func:`~harness.run.budget.capacity` nodes),
            or runs alone.
        seed: overrides every scenario's seed when given.
        on_result: called (from a worker thread, one call at a time) with each report as
            soon as its scenario ends.
        on_start: called (likewise serialised) with each scenario as a worker starts it.

    Raises:
        ValueError: ``jobs`` is less than 1.
        SuiteInterrupted: (a ``KeyboardInterrupt``) Ctrl-C: scenarios not yet started were
            cancelled, running ones stopped at once (nodes killed, proxies removed); it
            carries their reports.
    """
    if jobs == "auto":
        jobs = auto_jobs()
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1 or 'auto', got {jobs}")
    budget = Budget(capacity())
    seeds = [choose_seed(sc, seed, lambda: secrets.randbits(32)) for sc in scenarios]
    callbacks = threading.Lock()
    stop = threading.Event()

    def work(index: int) -> Report | None:
        if stop.is_set():
            return None  # interrupted before it started
        scenario = scenarios[index]
        if not budget.acquire(cost(scenario), stop):
            return None  # interrupted while it waited for room
        try:
            if on_start is not None:
                with callbacks:
                    on_start(scenario)
            report = run_one(scenario, proxies, seeds[index], stop)
        finally:
            budget.release(cost(scenario))
        if on_result is not None:
            with callbacks:
                on_result(report)
        return report

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="harness-scenario")
    futures: list[Future[Report | None]] = []
    ctrl_c = threading.Event()
    try:
        with _ctrl_c_noted(ctrl_c):
            futures = [pool.submit(work, i) for i in range(len(scenarios))]
            _await(futures, ctrl_c)
        reports = [f.result() for f in futures]
    except KeyboardInterrupt:
        stop.set()
        _wait_for(pool)
        ended = [f.result() for f in futures if not f.cancelled() and f.exception() is None]
        raise SuiteInterrupted([r for r in ended if r is not None]) from None
    except BaseException:
        stop.set()
        _wait_for(pool)
        raise
    pool.shutdown(wait=True)
    return [r for r in reports if r is not None]


#: How often the main thread wakes while scenarios run. A process-directed SIGINT may be
#: taken by any thread; Python then raises ``KeyboardInterrupt`` in the main thread only
#: once that thread runs again, which a wait without a timeout would postpone for as long as
#: the scenarios run (a "waits forever" scenario: forever).
_WAKE_SECONDS = 0.2


@contextlib.contextmanager
def _ctrl_c_noted(seen: threading.Event) -> Iterator[None]:
    """In the main thread, while the suite runs: a SIGINT also sets ``seen`` before its
    handler raises ``KeyboardInterrupt`` as before.

    Python raises that exception in whatever the main thread runs next -- which may be a
    finalizer (a ``__del__``, a generator closed by the garbage collector: Ray's actor
    handles have one), where it is printed as "Exception ignored in ..." and lost; the
    Ctrl-C would then go unheeded. :func:`_await` looks at ``seen`` too. Nothing changes in
    another thread, or when SIGINT is not handled by a Python function (ignored).
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    handler = previous

    def note(signum: int, frame: FrameType | None) -> None:
        seen.set()
        handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _await(futures: list[Future[Report | None]], ctrl_c: threading.Event) -> None:
    """Wait until every future is done (or one failed), waking every ``_WAKE_SECONDS`` so
    that Ctrl-C is acted on promptly whichever thread the signal reached -- also when its
    ``KeyboardInterrupt`` was lost in a finalizer (``ctrl_c`` set: raised here again)."""
    pending = set(futures)
    while pending:
        if ctrl_c.is_set():
            raise KeyboardInterrupt
        done, pending = wait(pending, timeout=_WAKE_SECONDS, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in done if not f.cancelled()):
            return


def _wait_for(pool: ThreadPoolExecutor) -> None:
    """Cancel what has not started and wait for the running scenarios to stop (they were
    told to); a further Ctrl-C does not abandon processes they are killing."""
    while True:
        try:
            pool.shutdown(wait=True, cancel_futures=True)
        except KeyboardInterrupt:
            continue
        return
