"""Is the process behind a rank claim still alive? (local OS probes, no network I/O).

A restarted node (same host, same rank, new pid) may take over the claim of its dead
predecessor (see :mod:`rdzv.rendezvous._join`). That is only safe when "same host" really
means the same kernel and pid namespace: two containers with one host name would otherwise
probe each other's pids. So a claim records, next to the host name, a *machine* tag: the
kernel's boot id and the inode of the pid namespace (Linux); elsewhere the tag is empty and
only the host name is compared.

A claimant whose pid is *this* process's own is not probed through the kernel (it would
always look alive): it is one of this process's handlers, alive while that handler is. Every
handler enters a process-wide registry of live handler tokens when it is made
(:func:`handler_started`) and leaves it when it shuts down, when it is garbage-collected, or
when it is declared dead (:func:`handler_ended`; the public form is
:meth:`rdzv.rendezvous.static.StaticTCPRendezvous.declare_dead`, for runtimes that emulate a
crashed process inside a live one, e.g. several simulated nodes per process).

Invariants:

1. :func:`process_alive` answers "dead" only when the kernel says the pid does not exist
   (``ESRCH``) or that it is a zombie (exited, not yet reaped by its parent). Anything
   unclear (``EPERM``: alive but not ours; an unreadable ``/proc``; a pid <= 0) is "alive",
   so an uncertain probe can only turn a takeover into a duplicate-rank error, never the
   other way round.
2. :func:`claimant_alive` of a claim recorded by this very process (same machine, checked
   by the caller, and same pid) is "dead" only when the token is not in the registry: its
   handler was shut down, declared dead, or collected. A handler in the registry is alive,
   whatever its thread is doing.
"""

from __future__ import annotations

import os
import threading
import weakref

__all__ = [
    "claimant_alive",
    "handler_ended",
    "handler_started",
    "live_handlers",
    "local_machine",
    "process_alive",
]


class _Registry:
    """This process's live handlers: token -> a weak reference to the object that holds its
    claims (so a handler dropped without shutdown() counts as gone once it is collected).

    A plain dict of ``weakref.ref``, not a ``WeakValueDictionary``: entering a handler is on
    every node's first join, and in a freshly forked node the latter's Python-level machinery
    costs tens of µs. Entries of collected handlers are dropped whenever the dict has doubled
    since the last sweep, so they stay a bounded share of it.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.lock = threading.Lock()
        self.live: dict[str, weakref.ref[object]] = {}
        self.sweep_at = _SWEEP_FROM

    def alive(self) -> dict[str, weakref.ref[object]]:
        """The entries whose handler is alive (call with ``lock`` held)."""
        return {token: ref for token, ref in self.live.items() if ref() is not None}


#: Registry size from which collected handlers' entries are swept (then: twice the live).
_SWEEP_FROM = 64

_REGISTRY = _Registry()
# In a forked child no handler of the parent runs (and the child's pid is another).
os.register_at_fork(after_in_child=_REGISTRY.reset)


def handler_started(token: str, owner: object) -> None:
    """Record the handler with ``token`` as alive in this process, for as long as ``owner``
    (the object that holds its claims) exists or until :func:`handler_ended`."""
    registry = _REGISTRY
    with registry.lock:
        live = registry.live
        live[token] = weakref.ref(owner)
        if len(live) >= registry.sweep_at:
            registry.live = registry.alive()
            registry.sweep_at = max(_SWEEP_FROM, 2 * len(registry.live))


def handler_ended(token: str) -> None:
    """The handler with ``token`` is no more (shut down, or declared dead): a handler of this
    process may now take over its claims (idempotent)."""
    with _REGISTRY.lock:
        _REGISTRY.live.pop(token, None)


def live_handlers() -> frozenset[str]:
    """The tokens of this process's live handlers (a snapshot)."""
    with _REGISTRY.lock:
        return frozenset(_REGISTRY.alive())


def claimant_alive(pid: int, token: str) -> bool:
    """Whether the claimant ``(pid, token)`` of this machine is alive (invariants 1 and 2):
    a handler of this process by the registry, any other process by the kernel."""
    if pid == os.getpid():
        with _REGISTRY.lock:
            ref = _REGISTRY.live.get(token)
        return ref is not None and ref() is not None
    return process_alive(pid)


def local_machine() -> str:
    """This process's machine tag: ``"<boot id>/<pid namespace inode>"``, or ``""``.

    Reads ``/proc``; returns ``""`` where it is unavailable (not Linux, or a sandbox that
    hides it), which makes claims comparable by host name only.
    """
    # Read raw, not through a text file: the first text ``open`` of an encoding imports its
    # codec and builds a TextIOWrapper, about a millisecond of CPU in a freshly forked node,
    # which is most of what building a handler costs (bench/bench_rendezvous.py).
    try:
        fd = os.open("/proc/sys/kernel/random/boot_id", os.O_RDONLY)
        try:
            boot = os.read(fd, 64).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
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
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat_file:
            stat = stat_file.read()
    except FileNotFoundError:  # it exited between the two probes, or there is no /proc
        return not os.path.exists("/proc/self/stat")
    except OSError:
        return True
    fields = stat.rpartition(")")[2].split()  # the command name may contain spaces or ')'
    return not fields or fields[0] not in ("Z", "X")
