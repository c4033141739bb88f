"""A Ctrl-C whose ``KeyboardInterrupt`` is lost still stops the suite.

Python raises the ``KeyboardInterrupt`` of a SIGINT in whatever the main thread runs next;
when that is a finalizer (a ``__del__`` run because an object's last reference went, or by
the garbage collector -- Ray's actor handles have one) the exception is printed as
"Exception ignored in ..." and dropped. The suite's main thread notes the signal itself and
raises it again while it waits on its scenarios.
"""

from __future__ import annotations

import signal
import sys
import threading
from concurrent.futures import Future
from typing import Any

import pytest

from harness.run.model import Report
from harness.run.suite import _await, _ctrl_c_noted


class _CtrlCInFinalizer:
    """Its finalizer is where the Ctrl-C lands."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)  # the handler runs in this finalizer
        sum(range(10))


def test_a_ctrl_c_lost_in_a_finalizer_still_ends_the_wait_on_the_scenarios(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lost: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", lost.append)
    # Python's own SIGINT handler, as in an interactive run (a pytest-xdist worker ignores SIGINT)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    before = signal.getsignal(signal.SIGINT)
    seen = threading.Event()
    running: Future[Report | None] = Future()  # a scenario that never ends

    with _ctrl_c_noted(seen):
        _CtrlCInFinalizer()  # dropped at once: its __del__ runs here, in the main thread
        assert [type(u.exc_value) for u in lost] == [KeyboardInterrupt]  # lost, as in the field
        with pytest.raises(KeyboardInterrupt):
            _await([running], seen)

    try:
        assert signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGINT, outer)


def test_outside_the_main_thread_the_sigint_handler_is_left_alone() -> None:
    before = signal.getsignal(signal.SIGINT)
    inside: list[object] = []

    def suite() -> None:
        with _ctrl_c_noted(threading.Event()):
            inside.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=suite)
    thread.start()
    thread.join()

    assert inside == [before]
