"""``--trace`` of ``bench_rendezvous.py``: where an rdzv node's time went, from its events."""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

TRACED = ("server_listening", "connected", "joined", "complete")


class Trace(logging.Handler):
    """Keeps the monotonic time of the first of each traced rdzv event, and the attempts."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.at: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.cpu0 = 0.0
        self.attempts = 0
        self.offset = time.time() - time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, "rdzv_event", None)
        if not isinstance(payload, dict):
            return
        name = payload["event"]
        if name in TRACED and name not in self.at:
            self.at[name] = record.created - self.offset
            self.cpu[name] = time.process_time() - self.cpu0
        if name == "connected":
            self.attempts = int(payload["attempts"])


def summary(results: dict[int, dict[str, Any]], start: float) -> dict[str, Any]:
    """Median and max over nodes of each traced instant (seconds after the start)."""
    traces = [p["trace"] for p in results.values()]
    summary: dict[str, Any] = {}
    listening = results[0]["trace"].get("server_listening")
    if listening is not None:
        summary["node0 listening"] = round(listening - start, 4)
    for name in ("connected", "joined", "complete"):
        times = [t[name] - start for t in traces if name in t]
        if times:
            summary[name] = (round(statistics.median(times), 4), round(max(times), 4))
    returned = [p["t"] - start for p in results.values()]
    summary["returned"] = (round(statistics.median(returned), 4), round(max(returned), 4))
    for name in ("connected", "joined", "complete"):
        spent = [t[f"cpu {name}"] * 1000 for t in traces if f"cpu {name}" in t]
        if spent:
            summary[f"cpu ms {name}"] = (round(statistics.median(spent), 2), round(max(spent), 2))
    attempts = [t["attempts"] for t in traces]
    summary["attempts"] = (statistics.median(attempts), max(attempts))
    return summary
