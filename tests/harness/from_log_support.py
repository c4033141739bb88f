"""Turning a run's report back into node logs, as each node would have written them.

A node that runs rdzv with logging configured prints each of rdzv's events as a line
(``name: message`` or ``name key=value ...``, :func:`rdzv.events.emit`); this writes them in
torch's bracketed-date format (the clock: the scenario's, from a fixed date), and a node that
failed ends with its error's last traceback line. An absent node's log is empty; a killed
node's simply stops.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from harness.run.model import NodeOutcome, Report

__all__ = ["missing_ranks", "node_logs"]

_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _event_text(event: str, fields: dict[str, Any]) -> str:
    message = fields.get("message")
    if isinstance(message, str):
        return f"{event}: {message}"
    return f"{event} " + " ".join(f"{k}={v!r}" for k, v in fields.items())


def node_log(outcome: NodeOutcome) -> str:
    lines = []
    for event in outcome.events:
        stamp = _EPOCH + dt.timedelta(seconds=event.t)
        when = f"{stamp:%Y-%m-%d %H:%M:%S},{stamp.microsecond // 1000:03d}"
        level = "WARNING" if event.event == "failed" else "INFO"
        lines.append(
            f"[{when}] rdzv.rendezvous: [{level}] {_event_text(event.event, event.fields)}"
        )
    if outcome.error_class and outcome.message:
        lines.append("Traceback (most recent call last):")
        lines.append('  File "train.py", line 12, in <module>')
        lines.append(f"{outcome.error_class}: {outcome.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def node_logs(outcomes: Iterable[NodeOutcome]) -> list[tuple[str, str]]:
    """One ``(name, text)`` per node: ``node-<id>.log``."""
    return [(f"node-{o.node}.log", node_log(o)) for o in outcomes]


_MISSING = re.compile(r"missing ranks: ([\d, -]+\d)")


def missing_ranks(report: Report) -> set[str]:
    """The missing ranks the nodes of a run named (as rdzv writes them: ``1-3, 5``)."""
    return {m[1] for o in report.outcomes if o.message for m in [_MISSING.search(o.message)] if m}
