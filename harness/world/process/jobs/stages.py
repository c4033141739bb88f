"""The node's end of its workers' stage reports (:mod:`harness.world.process.jobs.worker`).

A :class:`StageListener` binds a datagram socket in a directory of its own (a path short
enough for ``AF_UNIX``), and a thread reads one JSON report per datagram and hands it on as
``(part, stage, t, fields)``. Datagrams on a local socket are never cut or reordered per
sender; a report that is not JSON is handed on as stage ``bad_report`` (never dropped
silently).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from harness.world.process.jobs.spec import worker_part

__all__ = ["StageListener", "StageSink"]

#: Where a stage goes: part, stage, time (monotonic), fields.
StageSink = Callable[[str, str, float, dict[str, Any]], None]
_LARGEST = 65536


class StageListener:
    """Reads workers' stage reports on :attr:`path` until :meth:`close`."""

    def __init__(self, sink: StageSink) -> None:
        self._dir = tempfile.mkdtemp(prefix="hjob")
        self.path = os.path.join(self._dir, "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sink = sink
        self._thread = threading.Thread(target=self._read, name="job-stages", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = self._sock.recv(_LARGEST)
            except OSError:
                return
            if not data:  # close() wakes the reader with an empty datagram
                return
            self._hand_on(data)

    def _hand_on(self, data: bytes) -> None:
        try:
            report = json.loads(data)
            part = worker_part(int(report.pop("local_rank")))
            stage = str(report.pop("stage"))
            t = float(report.pop("t"))
        except (ValueError, KeyError, TypeError, AttributeError):
            self._sink("node", "bad_report", 0.0, {"data": data[:200].decode(errors="replace")})
            return
        self._sink(part, stage, t, report)

    def close(self) -> None:
        """Stop reading (every report already sent is handed on first) and remove the
        socket."""
        poke = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        with poke, contextlib.suppress(OSError):
            poke.sendto(b"", self.path)
        self._thread.join()
        self._sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)
