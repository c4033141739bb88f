"""The Ray world's waits on Ray, cut short when the run is stopped (Ctrl-C).

A Ctrl-C reaches the harness's main thread as ``KeyboardInterrupt``; the suite then sets the
run's stop event and waits for the run's thread to end. That thread may be inside a long
wait on Ray (the placement group being placed, an actor coming up: seconds each on a busy
machine, tens of seconds for a whole start-up), so every wait here is made of short
``ray.wait`` calls that look at the stop event in between: once it is set, the wait gives
up within :data:`TICK` seconds with :class:`RunInterrupted`, and the world tears down what
it made.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import ray

from harness.errors import HarnessError

__all__ = ["TICK", "RunInterrupted", "Waits"]

#: The longest a stopped run waits on Ray before it notices the stop.
TICK: Final = 0.2


class RunInterrupted(HarnessError):
    """The run was stopped (Ctrl-C) while the Ray world waited on Ray; what it made is
    removed by its teardown."""


class Waits:
    """Waits on Ray that give up when ``stop`` is set (see the module docstring)."""

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop if stop is not None else threading.Event()

    def check(self, what: str) -> None:
        """Raises RunInterrupted: the run was stopped (before ``what``)."""
        if self.stop.is_set():
            raise RunInterrupted(f"the run was interrupted (Ctrl-C) before {what}")

    def get(self, refs: Any, timeout: float, what: str) -> Any:
        """``ray.get(refs)`` (one ref or a list), waiting at most ``timeout`` seconds.

        Raises:
            RunInterrupted: the run was stopped while it waited.
            HarnessError: ``what`` did not happen within ``timeout`` seconds.
            Exception: what ``ray.get`` raises (an actor's error, a dead actor).
        """
        pending = list(refs) if isinstance(refs, list) else [refs]
        deadline = time.monotonic() + timeout
        while pending:
            self.check(what)
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(
                    f"the ray world waited {timeout:.0f}s for {what} in vain: is the Ray "
                    "cluster overloaded, or short of the CPUs the run asks for?"
                )
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=min(TICK, left))
        return ray.get(refs)
