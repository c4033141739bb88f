"""Turning a run's report back into node logs, as each node would have written them.

A node that runs rdzv with logging configured prints each of rdzv's events as a line
(``name: message`` or ``name key=value ...``, :func:`rdzv.events.emit`); this writes them in
torch's bracketed-date format (the clock: the scenario's, from a fixed date), and a node that
failed ends with its error's last traceback line. An absent node's log is empty; a killed
node's simply stops.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.logs import convert
from harness.run.model import NodeOutcome, Report
from harness.run.suite import run_suite
from harness.scenario.load import load
from harness.world.netns import naming
from harness.world.netns.shell import run

__all__ = [
    "agents",
    "assert_same_outcomes",
    "assert_same_symptom",
    "missing_ranks",
    "no_namespace_left",
    "node_logs",
    "round_trip",
]

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
    """One ``(name, text)`` per node: ``node-<id>.log``. A job node's log goes on with what
    its processes wrote (the tail the harness keeps): torchrun's agent lines (glog), c10d's
    C++ lines, the workers' tracebacks."""
    return [
        (f"node-{o.node}.log", node_log(o) + (o.output or "" if o.parts else "")) for o in outcomes
    ]


_MISSING = re.compile(r"missing ranks: ([\d, -]*\d)")


_RANK_KEY = re.compile(r"/default_pg/\d+//\w+//\d+/(\d+)\b")


def missing_ranks(report: Report) -> set[str]:
    """The missing ranks the nodes of a run named (as rdzv writes them: ``1-3, 5``), and a
    job's workers (the rank whose gloo key they waited for: ``worker 3``)."""
    named = {m[1] for o in report.outcomes if o.message for m in [_MISSING.search(o.message)] if m}
    parts = [p for o in report.outcomes for p in o.parts if p.message]
    return named | {f"worker {m}" for p in parts for m in _RANK_KEY.findall(p.message or "")}


def agents(report: Report) -> dict[int, tuple[str, int | None]]:
    """Each job node's agent: its outcome class and restarts."""
    return {
        o.node: (p.status, p.restarts)
        for o in report.outcomes
        for p in o.parts
        if p.part == "agent"
    }


def round_trip(path: Path, tmp_path: Path) -> tuple[Report, Report, str]:
    """Run ``path``, convert its nodes' logs, run the scenario that comes out (in
    ``tmp_path``): the two reports and the scenario's text."""
    original = run_suite([load(path)])[0]  # its symptom is what it did, passed or not
    assert original.error is None and not original.skipped, original.error or original.skipped
    conversion = convert(node_logs(original.outcomes), name=f"replay-{path.stem.lower()}")
    written = tmp_path / f"replay-{path.stem}.toml"
    written.write_text(conversion.text, encoding="utf-8")
    replay = run_suite([load(written)])[0]
    return original, replay, conversion.text


def assert_same_outcomes(original: Report, replay: Report, text: str) -> None:
    """Every node ends in the same outcome class in the replay as in the original, but for
    a node the written scenario expects one of several outcomes (from-log's race of a node's
    deadline with the store host's): the original's must be one of them, and the replay's."""
    written: dict[int, list[str]] = {}
    for entry in tomllib.loads(text).get("expect", {}).get("nodes", []):
        if isinstance(entry.get("outcome"), list):
            written.update({node: entry["outcome"] for node in entry["nodes"]})
    before = {o.node: o.status for o in original.outcomes}
    after = {o.node: o.status for o in replay.outcomes}
    either = {n for n in written if before.get(n) in written[n] and after.get(n) in written[n]}
    same = {n: s for n, s in after.items() if n not in either}
    assert same == {n: s for n, s in before.items() if n not in either}, (
        f"outcomes differ: {before} became {after}; the scenario was:\n{text}"
    )


def assert_same_symptom(original: Report, replay: Report, text: str) -> None:
    """Every node's outcome class (:func:`assert_same_outcomes`) and the missing ranks named
    are the same, and the replay's own expectations (the log's symptom) hold."""
    assert_same_outcomes(original, replay, text)
    assert missing_ranks(replay) == missing_ranks(original), text
    assert agents(replay) == agents(original), f"the agents differ; the scenario was:\n{text}"
    assert replay.passed, f"{replay.violations}\n{text}"


@contextlib.contextmanager
def no_namespace_left() -> Iterator[None]:
    """Remove the network namespaces this process made inside the block (also on failure)
    and fail if there were any."""

    def ours() -> set[str]:
        return {n for n in naming.listed() if n.startswith(f"{naming.PREFIX}{os.getpid()}-")}

    before = ours()
    try:
        yield
    finally:
        left = sorted(ours() - before)
        for name in left:
            run(["ip", "netns", "del", name], check=False)
    assert not left, f"namespaces left behind: {left}"
