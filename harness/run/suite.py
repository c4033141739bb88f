"""Run many scenarios on a thread pool, as many at once as the machine holds; Ctrl-C.

This is the orchestration behind ``harness run`` (and anything else that wants a whole
suite): it never raises because one scenario went wrong (each runs through
:func:`harness.run.one.run_one`; a run that raised comes back as a report whose ``error`` is
one line: :mod:`harness.run.crash`). What it is made of, each a module of its own, is
re-exported here as before: the proxy providers (:mod:`harness.run.proxies`), the seed
(:mod:`harness.run.seed`), one run (:mod:`harness.run.one`) and the worlds' session
(:mod:`harness.run.worlds`).

Ctrl-C (``KeyboardInterrupt`` in the main thread) stops the suite promptly: scenarios not
yet started are cancelled, running ones are told to stop (their nodes are killed by PID
and their proxies torn down at once, without waiting for the run to end) and come back
marked ``interrupted``; :class:`SuiteInterrupted` then carries every report there is.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from types import FrameType
from typing import Literal

from harness.run.budget import Budget, auto_jobs, capacity, cost
from harness.run.model import Report
from harness.run.one import run_one
from harness.run.proxies import ProxyProvider, embedded_proxy, shared_proxy
from harness.run.seed import choose_seed, fresh_seed
from harness.run.worlds import WorldUnreachable, worlds_session
from harness.scenario.model import Scenario

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
    seeds = [choose_seed(sc, seed, fresh_seed) for sc in scenarios]
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
