"""The serving process's descriptors: the limit raised for many clients, and the table grown
for them before they come."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["raise_fd_limit", "reserve_descriptors"]


def raise_fd_limit() -> None:
    """Raise the soft descriptor limit towards 16384 (the hard limit bounds it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


#: Descriptors reserved beyond the expected clients: the loop's own, a few other
#: connections (the hosting node's own client is one of the expected).
_SPARE_DESCRIPTORS: Final = 32


def reserve_descriptors(sock: socket.socket, clients: int) -> None:
    """Grow this process's descriptor table ahead of ``clients`` more descriptors.

    The kernel grows the table (64 slots at first, then doubling) when a new descriptor
    does not fit, and in a process with more than one thread every growth first waits for
    an RCU grace period (``expand_fdtable`` calls ``synchronize_rcu``: 10-15 ms measured on
    a 2-core VM). Left to the accepts, the loop thread would wait out that grace period
    inside the accept of about the 60th client, the 124th, the 252nd, ... while every
    joining node waits for its reply, with the CPUs idle: one stall at N = 64, three at
    256, eight at 10,240. Grown once here instead: at once in a process with no other
    thread (no grace period is needed), else by a short-lived thread, so that the grace
    period passes while the loop starts serving (descriptors that fit the table are
    allocated meanwhile; only one that needs the growth waits for it); not at all when the
    table already holds them. Best effort: the table otherwise grows on demand as before.
    ``fcntl(F_DUPFD)`` takes the lowest free descriptor at or above the one asked for, so
    no open descriptor is touched.
    """
    if clients <= 0:
        return
    try:
        import fcntl
    except ImportError:  # not a POSIX system: nothing to grow ahead
        return
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    fd = sock.fileno()
    wanted = fd + clients + _SPARE_DESCRIPTORS
    if soft != resource.RLIM_INFINITY:
        wanted = min(wanted, soft - 1)
    size, threads = _table_and_threads()
    if wanted < size:  # it holds them already (a server of an earlier round grew it)
        return

    def grow() -> None:
        with contextlib.suppress(OSError):  # a closed socket, or out of memory: on demand
            os.close(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, wanted))

    if threads == 1:
        grow()
    else:
        threading.Thread(target=grow, name="rdzv-descriptors", daemon=True).start()


def _table_and_threads() -> tuple[int, int]:
    """The slots of this process's descriptor table and its threads (``/proc/self/status``);
    64 slots and 2 threads (grow, by a thread) where it cannot be read."""
    size, threads = 64, 2
    try:
        with open("/proc/self/status", "rb") as status:
            lines = status.read().splitlines()
    except OSError:
        return size, threads
    for line in lines:
        if line.startswith(b"FDSize:"):
            size = int(line.split()[1])
        elif line.startswith(b"Threads:"):
            threads = int(line.split()[1])
    return size, threads
