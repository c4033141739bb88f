"""Is the process behind a rank claim still alive? (local OS probes, no network I/O).

A restarted node (same host, same rank, new pid) may take over the claim of its dead
predecessor (see :mod:`rdzv.rendezvous._join`). That is only safe when "same host" really
means the same kernel and pid namespace: two containers with one host name would otherwise
probe each other's pids. So a claim records, next to the host name, a *machine* tag: the
kernel's boot id and the inode of the pid namespace (Linux); elsewhere the tag is empty and
only the host name is compared.

Invariants:

1. :func:`process_alive` answers "dead" only when the kernel says the pid does not exist
   (``ESRCH``) or that it is a zombie (exited, not yet reaped by its parent). Anything
   unclear (``EPERM``: alive but not ours; an unreadable ``/proc``; a pid <= 0) is "alive",
   so an uncertain probe can only turn a takeover into a duplicate-rank error, never the
   other way round.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["local_machine", "process_alive"]


def local_machine() -> str:
    """This process's machine tag: ``"<boot id>/<pid namespace inode>"``, or ``""``.

    Reads ``/proc``; returns ``""`` where it is unavailable (not Linux, or a sandbox that
    hides it), which makes claims comparable by host name only.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}/{namespace}"


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine still runs (see invariant 1).

    Returns:
        False only if the pid does not exist or is a zombie; True otherwise, including
        when the answer is uncertain.
    """
    if pid <= 0:  # os.kill(0 or -n, 0) would probe a process group, not a process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists but belongs to someone else; anything else: unsure
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # it exited between the two probes, or there is no /proc
        return not Path("/proc/self/stat").exists()
    except OSError:
        return True
    fields = stat.rpartition(")")[2].split()  # the command name may contain spaces or ')'
    return not fields or fields[0] not in ("Z", "X")
