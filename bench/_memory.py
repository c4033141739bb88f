"""Memory of processes, from ``/proc``: what the benchmarks print as "total memory" (and the
machine's load, printed next to every figure).

* PSS (proportional set size): resident pages, each shared page divided among the processes
  sharing it. The sum of PSS over a set of processes is what they cost the machine together
  (pages shared with a process outside the set, e.g. the forkserver, count only in part).
* USS (unique set size): private pages only (what ending the process would free).
* RSS and peak RSS (``VmHWM``): every resident page, shared or not.
"""

from __future__ import annotations

import os

MIB = 1024.0


def rollup_kib(pid: int) -> dict[str, int]:
    """``Rss``, ``Pss``, ``Private_Clean`` + ``Private_Dirty`` (as ``Uss``) of ``pid`` in KiB,
    from ``/proc/<pid>/smaps_rollup``; empty if the process is gone."""
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    fields[name] = int(parts[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    return {
        "Rss": fields.get("Rss", 0),
        "Pss": fields.get("Pss", 0),
        "Uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0),
    }


def peak_rss_kib(pid: int) -> int:
    """``VmHWM`` of ``pid`` (peak resident set) in KiB; 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return 0


def total_mib(pids: list[int]) -> dict[str, float]:
    """Sum of PSS, USS and RSS over ``pids`` in MiB, and how many were read."""
    rollups = [r for r in (rollup_kib(pid) for pid in pids) if r]
    return {
        "pss": sum(r["Pss"] for r in rollups) / MIB,
        "uss": sum(r["Uss"] for r in rollups) / MIB,
        "rss": sum(r["Rss"] for r in rollups) / MIB,
        "read": float(len(rollups)),
    }


def available_mib() -> float:
    """``MemAvailable`` of this machine in MiB."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / MIB
    return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) / MIB / MIB


def load_text() -> str:
    """The machine's load averages (1, 5, 15 min, ``/proc/loadavg``) and CPU count, to print
    next to figures measured on a shared machine."""
    with open("/proc/loadavg") as loadavg:
        one, five, fifteen = loadavg.read().split()[:3]
    return f"load average {one} {five} {fifteen} on {os.cpu_count()} CPUs"


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds ``pid`` has used so far, from ``/proc/<pid>/stat``
    (``(0.0, 0.0)`` if the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick
