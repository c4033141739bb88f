"""The process trial of ``bench_rendezvous.py``: one process per node (see its docstring for
the method), and the handler every trial builds (torch's constructor form).

How a node starts (``START``): what its forkserver preloads, and whether the handler is built
before the release (then only ``next_rendezvous()`` is timed) or after it (timed too):

* ``fresh``     nothing of the library preloaded: the import, the constructor and the
  rendezvous all run after the release, in every node at once;
* ``imported``  the user's top-of-file import line preloaded (a forkserver, or a module that
  imports the library at the top), the constructor and the rendezvous after the release;
* ``warm``      everything already imported (the server too) and the handler built.
"""

from __future__ import annotations

import contextlib
import gc
import glob
import logging
import multiprocessing
import os
import queue
import resource
import socket
import statistics
import sys
import time
from typing import Any

import _memory
import _tcpstats
import _trace

_RDZV_WARM = [
    "rdzv.rendezvous.static",
    "rdzv.store.client",
    "rdzv.store.server._server",  # the package alone imports the bind rules only
    "rdzv.rendezvous.registry",
]
_TORCH = ["torch.distributed", "torch.distributed.elastic.rendezvous.static_tcp_rendezvous"]
#: What a warm node's forkserver imported (also the packed trial's preload).
PRELOAD = {"rdzv": _RDZV_WARM, "rdzv-fd": _RDZV_WARM, "torch": _TORCH}
#: What a user's import line imports: ``from rdzv import StaticTCPRendezvous`` (the package's
#: lazy attribute imports ``rdzv.rendezvous.static``, nothing more) and torch's
#: ``import torch.distributed`` + ``from ...static_tcp_rendezvous import StaticTCPRendezvous``.
_USER_IMPORT = {"rdzv": ["rdzv.rendezvous.static"], "rdzv-fd": ["rdzv.rendezvous.static"]}
_USER_IMPORT["torch"] = _TORCH
START = ("imported", "fresh", "warm")


def preload_for(backend: str, start: str) -> list[str]:
    """The modules a ``start`` node's forkserver imports before any node exists."""
    if start == "fresh":
        return []
    return (_USER_IMPORT if start == "imported" else PRELOAD)[backend]


# -- one node ------------------------------------------------------------------------------


def make_handler(backend: str, rank: int, n: int, port: int, timeout: float, listen: Any) -> Any:
    if backend == "torch":
        from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import (
            StaticTCPRendezvous as TorchStatic,
        )

        return TorchStatic("127.0.0.1", port, rank, n, "bench", int(timeout))
    from rdzv.rendezvous.static import StaticTCPRendezvous

    fd = None if listen is None else listen.detach()
    return StaticTCPRendezvous("127.0.0.1", port, rank, n, "bench", timeout, listen_fd=fd)


def node(
    backend: str,
    rank: int,
    n: int,
    port: int,
    timeout: float,
    listen: Any,
    options: dict[str, Any],
    out: Any,
    go: Any,
    start_at: Any,
    returned_at: Any,
    finish: Any,
) -> None:
    """A node process: build the handler (warm), say ready, wait for the release, (build the
    handler,) rendezvous, note when it returned (one write to shared memory), and report only
    after the measurement."""
    try:
        built_before = options.get("start", "warm") == "warm"
        handler = make_handler(backend, rank, n, port, timeout, listen) if built_before else None
        trace = None
        if options["trace"] and backend != "torch":
            trace = _trace.Trace()
            logger = logging.getLogger("rdzv")
            logger.setLevel(logging.DEBUG)
            logger.addHandler(trace)
        profiler = threads = None
        if options["profile"] and rank in (0, 1, n - 1):
            import cProfile
            import threading

            profiler, threads = cProfile.Profile(), cProfile.Profile()

            def profile_thread(*_: Any) -> None:  # threads started from now: the server's
                sys.setprofile(None)
                threads.enable()

            threading.setprofile(profile_thread)
        out.put(("ready", rank, None))
        if not go.wait(timeout):
            raise TimeoutError("never released")
        # --node0-ahead: node 0 starts that much before the instant the others start at
        ahead = options.get("node0_ahead", 0.0) if rank == 0 else 0.0
        late = time.monotonic() - (start_at.value - ahead)
        if late < 0:
            time.sleep(-late)  # every node starts at the same instant, not in wake-up order
        # Garbage collections while timed: a forked node's first one writes (copies) every
        # page of the young objects it inherited.
        collections: list[int] = []
        gc.callbacks.append(lambda phase, _: collections.append(1) if phase == "start" else None)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = time.process_time()
        if trace is not None:
            trace.cpu0 = cpu
        if profiler is not None:
            profiler.enable()
        if handler is None:
            handler = make_handler(backend, rank, n, port, timeout, listen)
        built = time.process_time() - cpu
        info = handler.next_rendezvous()
        returned = time.monotonic()
        cpu = time.process_time() - cpu
        split = _split(usage, built, len(collections))
        returned_at[rank] = returned
        if profiler is not None:
            profiler.disable()
            path = os.path.join(options["profile"], f"{backend}-{n}-rank{rank}")
            profiler.dump_stats(path + ".prof")
            if threads is not None and rank == 0 and backend != "torch":
                threads.dump_stats(path + "-threads.prof")
        ok = (info.rank, info.world_size) == (rank, n)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = {"t": returned, "ok": ok, "rss_kib": rss, "cpu": cpu, "split": split}
        if trace is not None:
            cpu_at = {f"cpu {k}": v for k, v in trace.cpu.items()}
            result["trace"] = dict(trace.at, **cpu_at, attempts=trace.attempts)
        finish.wait(timeout)  # report and exit only after the measurement: not timed
        out.put(("done", rank, result))
    except Exception as exc:
        returned_at[rank] = -1.0
        out.put(("done", rank, {"error": f"{type(exc).__name__}: {exc}"}))


# -- one trial (a fresh interpreter in a fresh network namespace) --------------------------


def trial(
    backend: str, n: int, port: int, timeout: float, options: dict[str, Any]
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload_for(backend, options.get("start", "warm")))
    out = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    returned_at = ctx.Array("d", n, lock=False)  # 0: not yet, -1: failed
    finish = ctx.Event()
    sock = None
    if backend == "rdzv-fd":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))  # node 0 listens on it when its rendezvous starts
        port = sock.getsockname()[1]
    procs = []
    try:
        for rank in range(n):
            p = ctx.Process(
                target=node,
                args=(
                    backend,
                    rank,
                    n,
                    port,
                    timeout,
                    sock if rank == 0 else None,
                    options,
                    out,
                    go,
                    start_at,
                    returned_at,
                    finish,
                ),
            )
            p.start()
            procs.append(p)
        if sock is not None:
            sock.close()  # node 0 holds its own copy
        ready = 0
        deadline = time.monotonic() + timeout
        while ready < n:
            kind, rank, payload = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            if kind == "done":  # failed while building the handler
                return {"error": f"rank {rank}: {payload}"}
            ready += 1
        # Waking N processes through one Event is serialised (each sleeper acknowledges), so
        # the release names a common start instant far enough ahead for all of them to be
        # awake; a node woken after it starts at once and its lateness counts against it.
        start = time.monotonic() + 0.3 + n * 0.004 + options.get("node0_ahead", 0.0)
        start_at.value = start
        tcp = _tcpstats.counters()  # the trial's own namespace: only its nodes' connects
        go.set()
        time.sleep(max(start - time.monotonic(), 0.0))
        idle = _idle_seconds()
        deadline = start + timeout
        # Nodes report after the measurement: until then, only look at shared memory.
        while not all(returned_at[:]) and time.monotonic() < deadline:
            time.sleep(0.002)
        idle = _idle_seconds() - idle
        tcp = _tcpstats.since(tcp)
        memory = _memory.total_mib([p.pid for p in procs if p.pid is not None])
        finish.set()
        results: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + 30
        while len(results) < n:
            try:
                kind, rank, payload = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            results[rank] = payload
        errors = [f"rank {r}: {p['error']}" for r, p in sorted(results.items()) if "error" in p]
        if len(results) < n or errors:
            missing = sorted(set(range(n)) - set(results))
            return {"error": f"missing ranks {missing[:10]}; errors {errors[:3]}"}
        last = max(p["t"] for p in results.values())
        rss = [p["rss_kib"] for p in results.values()]
        cpu = [p["cpu"] for p in results.values()]
        summary: dict[str, Any] = {
            "seconds": last - start,
            "all_correct": all(p["ok"] for p in results.values()),
            "node0_peak_rss_mib": results[0]["rss_kib"] / 1024,
            "median_peak_rss_mib": statistics.median(rss) / 1024,
            "node0_cpu_ms": results[0]["cpu"] * 1000,
            "median_cpu_ms": statistics.median(cpu) * 1000,
        }
        summary["tcp"] = tcp
        summary["split"] = {  # median over the nodes but node 0, and node 0's
            "node": {
                k: statistics.median(results[r]["split"][k] for r in range(1, n) or [0])
                for k in _SPLIT
            },
            "node0": results[0]["split"],
        }
        summary["pss_mib"] = memory["pss"]
        summary["node_uss_mib"] = memory["uss"] / n
        summary["cpu_idle_pct"] = 100 * idle / ((last - start) * (os.cpu_count() or 1))
        if options["trace"] and backend != "torch":
            summary["trace"] = _trace.summary(results, start)
        return summary
    finally:
        if sock is not None:
            sock.close()
        finish.set()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, 9)
                p.join(timeout=5)


#: Where a node's CPU went while timed (``--trace`` prints them; see ``_split``).
_SPLIT = ("built_ms", "user_ms", "system_ms", "switches", "faults", "collections")


def _split(before: Any, built: float, collections: int) -> dict[str, float]:
    """A node's CPU since ``before`` (``getrusage``): building the handler (CPU ms), user and
    system ms, voluntary context switches (waits for a reply), minor page faults (a forked
    node copies each page it writes), garbage collections."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "built_ms": built * 1000,
        "user_ms": (now.ru_utime - before.ru_utime) * 1000,
        "system_ms": (now.ru_stime - before.ru_stime) * 1000,
        "switches": now.ru_nvcsw - before.ru_nvcsw,
        "faults": now.ru_minflt - before.ru_minflt,
        "collections": collections,
    }


_CPUIDLE = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/time"))


def _idle_seconds() -> float:
    """Seconds every CPU of the machine spent idle since boot.

    From the cpuidle states' residency (microseconds, ``/sys/devices/system/cpu/cpu*/
    cpuidle``) where the kernel has them, else ``/proc/stat`` (clock ticks: 10 ms per CPU,
    too coarse for a window of tens of milliseconds). An idle period is counted when it
    ends, so the CPUs that went idle after the last node returned add nothing to the
    window.
    """
    if _CPUIDLE:
        total = 0
        for path in _CPUIDLE:
            with open(path, "rb") as state:
                total += int(state.read())
        return total / 1e6
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
