"""What a run left behind: processes, listening ports, threads -- the worlds' leak check.

Every world ends with :func:`leaks`: the processes it had to kill at the end, the ports it
opened that are still listened on, and its threads still running after teardown, one line
each. A port counts only when one of the run's own processes listens on it (:func:`ours`):
a port the run gave back can be bound at once by any other program on a shared machine
(another test run binding port 0), which is no leak of this run's. The line names the
holder of each port (its role in the run when the world knows it, else its process name),
so that a leak says where to look.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence

import psutil

__all__ = ["holders", "leaks", "listening", "ours"]


def ours(pids: Iterable[int] = ()) -> set[int]:
    """This process, every process below it, and ``pids`` (those a world started): the
    processes whose listeners a run's leak check may count."""
    me = psutil.Process()
    found = {me.pid, *pids}
    with contextlib.suppress(psutil.Error):
        found.update(child.pid for child in me.children(recursive=True))
    return found


def holders(ports: Sequence[int], owners: Collection[int] | None = None) -> dict[int, set[int]]:
    """Which of ``ports`` are still listened on (TCP), each with the PIDs listening on it,
    counting only ``owners`` (default: every process on this machine; a listener whose
    process the kernel does not name to us counts with no PID)."""
    wanted = set(ports)
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # pragma: no cover - not root and not Linux
        return {}
    found: dict[int, set[int]] = {}
    for conn in conns:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr[1] not in wanted:
            continue
        if owners is None or conn.pid in owners:
            pids = found.setdefault(int(conn.laddr[1]), set())
            if conn.pid is not None:
                pids.add(conn.pid)
    return found


def listening(ports: Sequence[int], owners: Collection[int] | None = None) -> list[int]:
    """Which of ``ports`` are still listened on (TCP) by one of ``owners`` (default: by any
    process on this machine), in order."""
    return sorted(holders(ports, owners))


def leaks(
    pids: Sequence[int],
    ports: Sequence[int],
    problems: Sequence[str],
    threads: Sequence[threading.Thread] = (),
    owners: Collection[int] | None = None,
    roles: Mapping[int, str] | None = None,
) -> list[str]:
    """What a run left behind, one line each: processes still running at the end (killed),
    ``ports`` still listening (by ``owners``: see :func:`holders`; each with who holds it,
    named by ``roles`` where it has the PID), ``threads`` of the world still running after
    teardown, and teardown's ``problems``."""
    found = []
    if pids:
        found.append(f"node processes still running at the end: {list(pids)}")
    still = holders(ports, owners)
    if still:
        held = "; ".join(f"{port} by {_named(still[port], roles or {})}" for port in sorted(still))
        found.append(f"ports still listening after teardown: {sorted(still)} ({held})")
    running = [thread.name for thread in threads if thread.is_alive()]
    if running:
        found.append(f"threads still running after teardown: {running}")
    return [*found, *problems]


def _named(pids: Collection[int], roles: Mapping[int, str]) -> str:
    if not pids:
        return "a process not named to us"
    return ", ".join(_role(pid, roles) for pid in sorted(pids))


def _role(pid: int, roles: Mapping[int, str]) -> str:
    if pid in roles:
        return f"{roles[pid]} (pid {pid})"
    if pid == psutil.Process().pid:
        return f"the harness process itself (pid {pid})"
    try:
        name = psutil.Process(pid).name()
    except psutil.Error:
        name = "gone"
    return f"pid {pid} ({name})"
