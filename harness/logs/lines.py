"""Sans-IO classification of one log line: which format wrote it and what it says.

torch's line formats changed across releases (../shared/reference/torch-logs.md lists them);
a pasted log mixes several. :func:`classify` peels the prefixes torchrun and workers add
(``[default0]:`` -- torchrun's tee, ``[rank4]:`` -- a worker's stderr), then tries each
format in turn, most specific first. A line no format claims is returned as ``plain`` (the
readers of :mod:`harness.logs.signals` still look at its text: a traceback's last line is
plain); an empty line is ``None``.

Invariants:
1. No I/O and no clock: the same text always gives the same :class:`Line`.
2. Every format's pattern is anchored at the start of the line; ``text`` is what follows the
   format's own header, never the header itself.
3. ``when`` is a number of seconds on a clock of the line's own format (dated formats: the
   POSIX time of a naive date; glog's yearless ``MMDD``: of that day in the year 2000):
   only differences between lines of one format mean anything.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

__all__ = ["FORMATS", "Line", "classify"]

#: Format names, in the order :func:`classify` tries them.
FORMATS = (
    "harness-report",
    "harness-event",
    "elastic-early",
    "bracketed-date",
    "glog",
    "c10d-cpp",
    "nccl",
    "python-logging",
    "scheduler",
    "plain",
)

_LEVELS = {
    "D": "DEBUG",
    "I": "INFO",
    "W": "WARNING",
    "E": "ERROR",
    "F": "CRITICAL",
    "C": "CRITICAL",
    "WARN": "WARNING",
}

_TEE = re.compile(r"\[(?P<role>[A-Za-z_][A-Za-z_-]*?)(?P<local>\d+)\]:")
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:")
_OUTCOMES = "ok|timeout|connection_error|state_error|closed|error|killed|hung|absent"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "harness-report",
        re.compile(
            rf"node (?P<node>\d+): (?P<status>{_OUTCOMES})"
            r"(?:, after (?P<elapsed>[\d.]+) s)?(?: — (?P<text>.*))?$"
        ),
    ),
    (
        "harness-event",
        re.compile(
            r"\s+(?P<t>\d+\.\d+)(?:-\d+\.\d+)? s (?P<event>[a-z_]+)(?: x\d+)?(?::? (?P<text>.*))?$"
        ),
    ),
    (
        "elastic-early",
        re.compile(
            r"\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "
            r"(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+) (?P<logger>[\w.]+): (?P<text>.*)$"
        ),
    ),
    (
        "bracketed-date",
        re.compile(
            r"\[(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+)\] (?P<logger>[\w.]+): "
            r"\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] (?P<text>.*)$"
        ),
    ),
    (
        "glog",
        re.compile(
            r"(?P<lv>[DIWEF])(?P<mmdd>\d{4}) (?P<clock>\d\d:\d\d:\d\d\.\d+) +(?P<pid>\d+) "
            r"(?P<file>[^\s:\]]+):(?P<lineno>\d+)\] (?P<text>.*)$"
        ),
    ),
    (
        "c10d-cpp",
        re.compile(
            r"\[(?P<lv>[DIWEF])(?:(?P<mmdd>\d{4}) (?P<clock>\d\d:\d\d:\d\d\.\d+))?\s*"
            r"(?P<file>[\w./-]+\.(?:cpp|cc|hpp|h)):(?P<lineno>\d+)\] (?P<text>.*)$"
        ),
    ),
    (
        "nccl",
        re.compile(
            r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
            r"NCCL (?P<level>INFO|WARN|ERROR) (?P<text>.*)$"
        ),
    ),
    (
        "python-logging",
        re.compile(
            r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<logger>[\w.]+):(?P<text>.*)$"
        ),
    ),
    (
        "scheduler",
        re.compile(r"(?P<logger>srun|slurmstepd|sbatch)(?:\[\d+\])?: (?P<text>.*)$"),
    ),
)


@dataclass(frozen=True)
class Line:
    """One classified line.

    Attributes:
        source: where it came from (a file name, ``-`` for stdin).
        lineno: its 1-based number in ``source``.
        raw: the line as read (without its end of line).
        fmt: one of :data:`FORMATS`.
        text: the message, the format's header and the prefixes removed.
        level: ``DEBUG`` .. ``CRITICAL`` when the format says.
        logger: the logger (or C++ file, or scheduler) that wrote it, when said.
        when: seconds on the format's own clock (invariant 3), when the line is dated.
        pid: the process id the format carries (glog, NCCL).
        host: the host the format names (NCCL).
        rank: the global rank of a ``[rankN]:`` prefix.
        local_rank: the local rank of torchrun's ``[roleN]:`` tee prefix.
        node: the node a harness report line names.
        status: the outcome a harness report line names.
        event: the event a harness report's event line names.
        elapsed: the seconds a harness report line gives.
    """

    source: str
    lineno: int
    raw: str
    fmt: str
    text: str
    level: str | None = None
    logger: str | None = None
    when: float | None = None
    pid: int | None = None
    host: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    node: int | None = None
    status: str | None = None
    event: str | None = None
    elapsed: float | None = None

    @property
    def where(self) -> str:
        """``source:lineno``, how explanations cite the line."""
        return f"{self.source}:{self.lineno}"


def _date(value: str) -> float:
    stamp = dt.datetime.strptime(value.replace(",", "."), "%Y-%m-%d %H:%M:%S.%f")
    return stamp.replace(tzinfo=dt.UTC).timestamp()


def _yearless(mmdd: str | None, clock: str | None) -> float | None:
    if mmdd is None or clock is None:
        return None
    try:
        day = dt.datetime(2000, int(mmdd[:2]), int(mmdd[2:]), tzinfo=dt.UTC)
    except ValueError:
        return None
    hours, minutes, seconds = clock.split(":")
    return day.timestamp() + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def _prefixes(raw: str) -> tuple[str, int | None, int | None]:
    """Peel ``[roleN]:`` and ``[rankN]:`` prefixes (either order, each at most once)."""
    rest, rank, local = raw, None, None
    for _ in range(2):
        if rank is None and (m := _RANK.match(rest)):
            rank, rest = int(m["rank"]), rest[m.end() :]
        elif local is None and (m := _TEE.match(rest)):
            local, rest = int(m["local"]), rest[m.end() :]
    return rest, rank, local


def classify(raw: str, source: str = "-", lineno: int = 1) -> Line | None:
    """Classify one line (``None`` for a blank one). Never raises on any text."""
    raw = raw.rstrip("\r\n")
    body, rank, local = _prefixes(raw)
    if not body.strip():
        return None
    for fmt, pattern in _PATTERNS:
        m = pattern.match(body)
        if m is None:
            continue
        g = m.groupdict()
        level = g.get("level") or g.get("lv")
        when: float | None = None
        if g.get("date"):
            try:
                when = _date(g["date"])
            except ValueError:
                when = None
        elif g.get("mmdd"):
            when = _yearless(g["mmdd"], g["clock"])
        elif g.get("t"):
            when = float(g["t"])
        return Line(
            source,
            lineno,
            raw,
            rank=rank,
            local_rank=local,
            fmt=fmt,
            text=(g.get("text") or "").strip(),
            level=_LEVELS.get(level, level) if level else None,
            logger=g.get("logger") or g.get("file"),
            when=when,
            pid=int(g["pid"]) if g.get("pid") else None,
            host=g.get("host"),
            node=int(g["node"]) if g.get("node") else None,
            status=g.get("status"),
            event=g.get("event"),
            elapsed=float(g["elapsed"]) if g.get("elapsed") else None,
        )
    return Line(source, lineno, raw, "plain", body.strip(), rank=rank, local_rank=local)
