"""How a node process reports: its messages on its channel, rdzv's log events forwarded,
its output to a file, and the name of how its rendezvous ended.

* :class:`PipeReporter` — a node's side of its channel: one whole message per ``put``;
* :func:`forward_logs` — rdzv's (and torch's) structured log events, as messages;
* :func:`redirect_output` — Ctrl-C ignored, stdout and stderr to the node's own file;
* :func:`classify` — an exception, as the outcome's status.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from harness.world.messages import Event, Message
from rdzv.events import COPY_ATTR, EVENT_ATTR

__all__ = ["PipeReporter", "Queue", "classify", "forward_logs", "redirect_output"]


class Queue(Protocol):
    """Where a node puts its messages (a channel's reporter, a packed process's outbox)."""

    def put(self, item: Message) -> None: ...


def classify(exc: BaseException) -> str:
    """Map an exception to an outcome name (rdzv's classes, torch's, or the builtins)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "RendezvousClosedError" in names:
        return "closed"
    if "RendezvousStateError" in names:
        return "state_error"
    if isinstance(exc, TimeoutError) or "RendezvousTimeoutError" in names:
        return "timeout"
    if "DistStoreError" in names and re.search(r"timed out|timeout", str(exc), re.IGNORECASE):
        return "timeout"
    if isinstance(exc, ConnectionError) or names & {
        "RendezvousConnectionError",
        "DistNetworkError",
    }:
        return "connection_error"
    return "error"


class _Forward(logging.Handler):
    """Forward rdzv's structured events to the harness as they happen."""

    def __init__(self, node: int, queue: Queue) -> None:
        super().__init__(logging.DEBUG)
        self.node = node
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, COPY_ATTR, False):  # the original came through "rdzv" already
            return
        payload = getattr(record, EVENT_ATTR, None)
        if isinstance(payload, dict):
            fields = {k: v for k, v in payload.items() if k != "event"}
            self.queue.put(Event(self.node, time.monotonic(), payload["event"], fields))


def forward_logs(node: int, queue: Queue) -> None:
    """Send rdzv's (and torch's) structured log events of this process to ``queue``."""
    for name in ("rdzv", "torch.distributed"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_Forward(node, queue))
        logger.propagate = False


class PipeReporter:
    """A node's side of its channel: ``put`` sends one message, whole, from any thread.

    Pickled with the standard pickle (about 2 µs for a typed message, most of it naming its
    class; as much again to read it) and sent as bytes when the channel takes bytes (a
    ``multiprocess`` connection reads any pickle); its own ``send`` uses dill (about 45 µs).
    What the standard pickle cannot take goes through ``send``.
    """

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._send_bytes: Callable[[bytes], None] | None = getattr(connection, "send_bytes", None)
        self._lock = threading.Lock()

    def put(self, item: object) -> None:
        data = None
        if self._send_bytes is not None:
            try:
                data = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):
                data = None  # not plain data: dill, below
        with self._lock:
            if data is not None and self._send_bytes is not None:
                self._send_bytes(data)
            else:
                self._connection.send(item)


def redirect_output(output_path: str) -> None:
    """Set up a node process: Ctrl-C ignored, stdout and stderr to ``output_path``."""
    # Ctrl-C at a terminal reaches the whole process group: the harness, not the node,
    # decides what it means (it stops the run and kills its nodes by PID).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The node's stdout and stderr (torch's C++ logs included) go to its own file, shown
    # in the report, instead of interleaving on the harness's terminal.
    out = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
