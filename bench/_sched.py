"""Where a store server's time goes under the aggregate load, for ``bench_store.py``.

The aggregate row's pairs/s is the server's share of a CPU divided by its CPU time per pair:
the server is busy the whole window (it never sleeps in its poller: every wait returns
ready connections) and it shares the 2 CPUs with the 256 client processes, so the scheduler
gives it only part of a CPU. These read both factors, and how the server spends its calls:

* :func:`sched`: from ``/proc/<pid>/task/*/schedstat`` and ``status``, summed over the
  process's threads: nanoseconds on a CPU, nanoseconds runnable but waiting for one, and
  the voluntary (it slept) and involuntary (it was preempted) context switches.
* :func:`syscalls`: ``perf stat`` on the server (tracepoints of the system calls that move
  the requests: poller waits, receives, sends, poller changes), when ``perf`` is installed
  and permitted; None otherwise. Counting costs the server little (a counter per call).
* :func:`segments`: TCP segments sent in this network namespace (``/proc/net/snmp``
  ``OutSegs``; the bench runs in a namespace of its own, so they are its clients' and its
  server's): a request and its reply are 2 when every ACK rides on data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

__all__ = ["SYSCALLS", "Sched", "sched", "segments", "syscalls"]

#: The system calls counted, by the names ``perf`` gives their tracepoints: Python's socket
#: calls are recvfrom/sendto, torch's libuv uses read/write (and epoll_pwait).
SYSCALLS = (
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "recvfrom",
    "read",
    "sendto",
    "write",
    "writev",
)


class Sched:
    """Counters of one process (module doc)."""

    __slots__ = ("involuntary", "on_cpu_ns", "voluntary", "waiting_ns")

    def __init__(self, on_cpu_ns: int, waiting_ns: int, voluntary: int, involuntary: int) -> None:
        self.on_cpu_ns = on_cpu_ns
        self.waiting_ns = waiting_ns
        self.voluntary = voluntary
        self.involuntary = involuntary

    def __sub__(self, other: Sched) -> Sched:
        return Sched(
            self.on_cpu_ns - other.on_cpu_ns,
            self.waiting_ns - other.waiting_ns,
            self.voluntary - other.voluntary,
            self.involuntary - other.involuntary,
        )

    @property
    def share(self) -> float:
        """Of the time the process wanted a CPU, the part it had one."""
        wanted = self.on_cpu_ns + self.waiting_ns
        return self.on_cpu_ns / wanted if wanted else 0.0


def sched(pid: int) -> Sched:
    """The counters of ``pid`` summed over its threads (zeros for threads gone meanwhile)."""
    total = Sched(0, 0, 0, 0)
    with contextlib.suppress(FileNotFoundError):
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                    on_cpu, waiting, _ = map(int, stat.read().split())
                counts = {}
                with open(f"/proc/{pid}/task/{task}/status") as status:
                    for line in status:
                        if "ctxt_switches" in line:
                            name, value = line.split(":")
                            counts[name] = int(value)
                total.on_cpu_ns += on_cpu
                total.waiting_ns += waiting
                total.voluntary += counts.get("voluntary_ctxt_switches", 0)
                total.involuntary += counts.get("nonvoluntary_ctxt_switches", 0)
    return total


def segments() -> int:
    """TCP segments sent so far in this network namespace (``OutSegs``)."""
    with open("/proc/net/snmp") as snmp:
        tcp = [line.split() for line in snmp if line.startswith("Tcp:")]
    return int(dict(zip(tcp[0][1:], tcp[1][1:], strict=True))["OutSegs"])


@contextlib.contextmanager
def syscalls(pid: int) -> Iterator[dict[str, int]]:
    """Count :data:`SYSCALLS` made by ``pid`` inside the block; the dict yielded is filled
    when the block ends (left empty when ``perf`` is missing or refused)."""
    counts: dict[str, int] = {}
    perf = shutil.which("perf")
    if perf is None:
        yield counts
        return
    events = ",".join(f"syscalls:sys_enter_{name}" for name in SYSCALLS)
    proc = subprocess.Popen(
        [perf, "stat", "-x,", "-e", events, "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield counts
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].isdigit():
            counts[fields[2].removeprefix("syscalls:sys_enter_")] = int(fields[0])
