"""The packed trial of ``bench_rendezvous.py``: N nodes as threads in a few processes.

Ranks are split into ``procs`` contiguous blocks, one block per process (rank 0, which hosts
the store, is in process 0). Each process comes from a forkserver that preloads the library,
builds one handler per rank in torch's constructor form (``StaticTCPRendezvous(host, port,
rank, N, run_id, timeout)``: each thread gets its own handler and, in ``next_rendezvous()``,
its own store connection), starts one thread per rank and says it is ready. The release
names a common start instant a little ahead; every thread sleeps until it, then calls
``next_rendezvous()`` and notes its return time in shared memory. Measured: from the start
instant to the last return; the memory of the processes (sum of PSS, ``/proc/<pid>/
smaps_rollup``) sampled while they run and once after the last return. Reporting happens
only after that, as in the process trials.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import statistics
import threading
import time
from typing import Any

import _memory


def group(
    backend: str,
    index: int,
    ranks: list[int],
    n: int,
    port: int,
    timeout: float,
    out: Any,
    go: Any,
    start_at: Any,
    returned_at: Any,
    finish: Any,
    handler: Any,
) -> None:
    """One process of the packed trial: a thread per rank in ``ranks``."""
    results: dict[int, dict[str, Any]] = {}
    local = threading.Event()

    def run(rank: int, node: Any) -> None:
        try:
            local.wait()
            late = time.monotonic() - start_at.value
            if late < 0:
                time.sleep(-late)
            cpu = time.thread_time()
            info = node.next_rendezvous()
            returned_at[rank] = time.monotonic()
            ok = (info.rank, info.world_size) == (rank, n)
            results[rank] = {"ok": ok, "cpu": time.thread_time() - cpu}
        except Exception as exc:
            returned_at[rank] = -1.0
            results[rank] = {"error": f"{type(exc).__name__}: {exc}"}

    try:
        handlers = [(rank, handler(backend, rank, n, port, timeout, None)) for rank in ranks]
        threads = [
            threading.Thread(target=run, args=pair, name=f"rank{pair[0]}", daemon=True)
            for pair in handlers
        ]
        for thread in threads:
            thread.start()
    except Exception as exc:
        out.put(("done", index, {"error": f"{type(exc).__name__}: {exc}"}))
        return
    out.put(("ready", index, None))
    if not go.wait(timeout):
        out.put(("done", index, {"error": "never released"}))
        return
    local.set()
    for thread in threads:
        thread.join(timeout)
    finish.wait(timeout)  # report only after the measurement: not timed
    errors = [f"rank {r}: {p['error']}" for r, p in sorted(results.items()) if "error" in p]
    good = [p for p in results.values() if "error" not in p]
    out.put(
        (
            "done",
            index,
            {
                "returned": len(good),
                "ok": sum(1 for p in good if p["ok"]),
                "errors": errors[:3],
                "error_count": len(errors),
                "thread_cpu_ms": [p["cpu"] * 1000 for p in good],
                "process_cpu_s": time.process_time(),
            },
        )
    )


def trial(
    backend: str,
    n: int,
    procs: int,
    port: int,
    timeout: float,
    preload: list[str],
    handler: Any,
) -> dict[str, Any]:
    """Run one packed trial (inside the trial's own network namespace); its summary."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    out = ctx.Queue()
    go, finish = ctx.Event(), ctx.Event()
    start_at = ctx.Value("d", 0.0)
    returned_at = ctx.Array("d", n, lock=False)  # 0: not yet, -1: failed
    per = -(-n // procs)
    blocks = [list(range(i, min(i + per, n))) for i in range(0, n, per)]
    workers = []
    try:
        for index, ranks in enumerate(blocks):
            args = (backend, index, ranks, n, port, timeout, out, go, start_at, returned_at)
            p = ctx.Process(target=group, args=(*args, finish, handler))
            p.start()
            workers.append(p)
        pids = [p.pid for p in workers if p.pid is not None]
        deadline = time.monotonic() + timeout
        for _ in blocks:
            kind, index, payload = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            if kind == "done":
                return {"error": f"process {index}: {payload['error']}"}
        before = _memory.total_mib(pids)
        start = time.monotonic() + 0.5 + 0.02 * len(blocks)
        start_at.value = start
        go.set()
        time.sleep(max(start - time.monotonic(), 0.0))
        deadline = start + timeout
        peak_pss, next_sample = 0.0, 0.0
        while not all(returned_at[:]) and time.monotonic() < deadline:
            now = time.monotonic()
            if now >= next_sample:  # 8 small files: cheap enough to sample while it runs
                peak_pss = max(peak_pss, _memory.total_mib(pids)["pss"])
                next_sample = now + 0.25
            time.sleep(0.005)
        last = max(returned_at[:])
        after = _memory.total_mib(pids)
        finish.set()
        reports: dict[int, dict[str, Any]] = {}
        deadline = time.monotonic() + 60
        while len(reports) < len(blocks):
            try:
                kind, index, payload = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                break
            reports[index] = payload
        failed = [r for r in reports.values() if "error" in r or r["error_count"]]
        returned = sum(r.get("returned", 0) for r in reports.values())
        if len(reports) < len(blocks) or failed or returned < n:
            errors = [e for r in failed for e in r.get("errors", [r.get("error")])]
            count = sum(r.get("error_count", 1) for r in failed)
            return {"error": f"{n - returned} of {n} did not return; {count} errors {errors[:3]}"}
        cpu = [c for r in reports.values() for c in r["thread_cpu_ms"]]
        return {
            "seconds": last - start,
            "all_correct": sum(r["ok"] for r in reports.values()) == n,
            "procs": len(blocks),
            "pss_mib": after["pss"],
            "peak_pss_mib": max(peak_pss, after["pss"]),
            "pss_before_mib": before["pss"],
            "uss_mib": after["uss"],
            "median_thread_cpu_ms": statistics.median(cpu),
            "process_cpu_s": sum(r["process_cpu_s"] for r in reports.values()),
        }
    finally:
        finish.set()
        for p in workers:
            p.join(timeout=10)
            if p.is_alive() and p.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, 9)
                p.join(timeout=5)
