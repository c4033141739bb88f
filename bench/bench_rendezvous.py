"""Static rendezvous wall time, rdzv vs torch: start -> every node returned, N = 8, 64, 256.

Each trial runs in a fresh interpreter (``--trial``) so the two libraries never share a
forkserver, imports or memory figures. A trial pre-starts N node processes from a forkserver
that preloads the library, waits until every node is ready, then names a common start
instant a little ahead (waking N sleepers through one event is serialised, so the event only
says "start at T"), and measures, on the system-wide monotonic clock, from T to the last
node's return from ``next_rendezvous()``. Node processes stay alive until the measurement
is over, so interpreter teardown is not timed. Peak RSS and CPU time are per node. Every
wait is bounded; leftover node processes are killed by PID.

Where: ``default`` is this network namespace; ``netns`` re-runs the trial inside
``unshare -n sh -c 'ip link set lo up; exec python bench_rendezvous.py --trial ...'``, a
fresh namespace with only loopback and no reachable DNS server, so torch's per-connection
reverse-DNS lookup fails at once instead of stalling on the resolver.

Ports: rdzv's node 0 adopts a socket the trial bound to port 0 (``listen_fd``), so no port
is ever released between choosing and using it; node 0 starts listening when its
``next_rendezvous()`` starts, so early dials are refused and retried, as with a node 0 that
binds at start. ``--backends rdzv-listen`` hands over a socket that already listens (early
dials wait in the backlog): what a launcher that pre-binds the port gets. torch's static
backend has no such option; its trial holds the bound socket until every node is ready and
closes it just before the release (a tiny window, documented here: it is a probe-then-close).

Usage::

    python bench/bench_rendezvous.py                       # N = 8 64 256, both places
    python bench/bench_rendezvous.py --nodes 8 64 --repeat 3 --where netns
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PRELOAD = {
    "rdzv": ["rdzv.rendezvous.static", "rdzv.store.client", "rdzv.rendezvous.registry"],
    "rdzv-listen": ["rdzv.rendezvous.static", "rdzv.store.client", "rdzv.rendezvous.registry"],
    "torch": [
        "torch.distributed",
        "torch.distributed.elastic.rendezvous.static_tcp_rendezvous",
    ],
}


# -- one node ------------------------------------------------------------------------------


def node(
    backend: str,
    rank: int,
    n: int,
    port: int,
    timeout: float,
    listen: Any,
    out: Any,
    go: Any,
    start_at: Any,
    finish: Any,
) -> None:
    """A node process: build the handler, say ready, wait for the release, rendezvous."""
    try:
        if backend.startswith("rdzv"):
            from rdzv.rendezvous.api import RendezvousParameters
            from rdzv.rendezvous.static import create_rdzv_handler

            config: dict[str, Any] = {"rank": rank, "timeout": timeout}
            if listen is not None:
                config["listen_fd"] = listen.detach()
            handler: Any = create_rdzv_handler(
                RendezvousParameters("static", f"127.0.0.1:{port}", "bench", n, n, **config)
            )
        else:
            from torch.distributed.elastic.rendezvous import RendezvousParameters as TorchParams
            from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import (
                create_rdzv_handler as torch_create,
            )

            handler = torch_create(
                TorchParams(
                    "static", f"127.0.0.1:{port}", "bench", n, n, rank=rank, timeout=int(timeout)
                )
            )
        out.put(("ready", rank, None))
        if not go.wait(timeout):
            raise TimeoutError("never released")
        late = time.monotonic() - start_at.value
        if late < 0:
            time.sleep(-late)  # every node starts at the same instant, not in wake-up order
        cpu = time.process_time()
        info = handler.next_rendezvous()
        returned = time.monotonic()
        cpu = time.process_time() - cpu
        ok = (info.rank, info.world_size) == (rank, n)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out.put(("done", rank, {"t": returned, "ok": ok, "rss_kib": rss, "cpu": cpu}))
        finish.wait(timeout)  # exit only after the measurement: teardown is not timed
    except Exception as exc:
        out.put(("done", rank, {"error": f"{type(exc).__name__}: {exc}"}))


# -- one trial (a fresh interpreter) -------------------------------------------------------


def trial(backend: str, n: int, timeout: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD[backend])
    out = ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    finish = ctx.Event()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    if backend == "rdzv-listen":
        sock.listen(4096)  # early dials wait in the backlog instead of being refused
    port = sock.getsockname()[1]
    procs = []
    try:
        for rank in range(n):
            listen = sock if (backend.startswith("rdzv") and rank == 0) else None
            p = ctx.Process(
                target=node,
                args=(backend, rank, n, port, timeout, listen, out, go, start_at, finish),
            )
            p.start()
            procs.append(p)
        if backend.startswith("rdzv"):
            sock.close()
        ready = 0
        deadline = time.monotonic() + timeout
        while ready < n:
            kind, rank, payload = out.get(timeout=max(deadline - time.monotonic(), 0.01))
            if kind == "done":  # failed while building the handler
                return {"error": f"rank {rank}: {payload}"}
            ready += 1
        sock.close()  # torch: release the held port right before the start
        # Waking N processes through one Event is serialised (each sleeper acknowledges), so
        # the release names a common start instant far enough ahead for all of them to be
        # awake; a node woken after it starts at once and its lateness counts against it.
        start = time.monotonic() + 0.3 + n * 0.004
        start_at.value = start
        go.set()
        results: dict[int, dict[str, Any]] = {}
        deadline = start + timeout
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
        return {
            "seconds": last - start,
            "all_correct": all(p["ok"] for p in results.values()),
            "node0_peak_rss_mib": results[0]["rss_kib"] / 1024,
            "median_peak_rss_mib": statistics.median(rss) / 1024,
            "parent_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "node0_cpu_ms": results[0]["cpu"] * 1000,
            "median_cpu_ms": statistics.median(cpu) * 1000,
        }
    finally:
        sock.close()
        finish.set()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, 9)
                p.join(timeout=5)


# -- orchestration -------------------------------------------------------------------------


def run_trial(backend: str, n: int, where: str, timeout: float) -> dict[str, Any]:
    me = [sys.executable, os.path.abspath(__file__), "--trial", backend, str(n), str(timeout)]
    if where == "netns":
        inner = "ip link set lo up && exec " + " ".join(shlex.quote(a) for a in me)
        cmd = ["unshare", "-n", "sh", "-c", inner]
    else:
        cmd = me
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    )
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout * 3, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"trial exceeded {timeout * 3:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


_WIDTHS = (8, 5, 12, 9, 24, 10, 9, 13, 12)


def _row(cells: list[str]) -> str:
    return " ".join(cell.rjust(width) for cell, width in zip(cells, _WIDTHS, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--where", choices=["netns", "default", "both"], default="both")
    parser.add_argument("--backends", nargs="+", default=["rdzv", "torch"], choices=sorted(PRELOAD))
    parser.add_argument("--timeout", type=float, default=120.0, help="bound of each trial (s)")
    parser.add_argument(
        "--trial", nargs=3, metavar=("BACKEND", "N", "TIMEOUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.trial:
        backend, n, timeout = args.trial[0], int(args.trial[1]), float(args.trial[2])
        print(json.dumps(trial(backend, n, timeout)), flush=True)
        return
    places = ["netns", "default"] if args.where == "both" else [args.where]
    header = ["where", "N", "backend", "median s", "runs (s)", "node0 MiB", "node MiB"]
    header += ["node0 CPU ms", "node CPU ms"]
    print(_row(header))
    for where in places:
        for n in args.nodes:
            medians: dict[str, float] = {}
            runs_of: dict[str, list[dict[str, Any]]] = {b: [] for b in args.backends}
            for _ in range(args.repeat):  # interleaved, so load drift hits every backend alike
                for backend in args.backends:
                    runs_of[backend].append(run_trial(backend, n, where, args.timeout))
            for backend, runs in runs_of.items():
                good = [r for r in runs if "seconds" in r]
                for r in runs:
                    if "error" in r:
                        print(f"{where} N={n} {backend} ERROR {r['error']}")
                if not good:
                    continue
                medians[backend] = statistics.median(r["seconds"] for r in good)
                cells = [where, str(n), backend, f"{medians[backend]:.3f}"]
                cells.append(", ".join(f"{r['seconds']:.3f}" for r in good))
                cells.append(f"{max(r['node0_peak_rss_mib'] for r in good):.1f}")
                cells.append(f"{max(r['median_peak_rss_mib'] for r in good):.1f}")
                cells.append(f"{statistics.median(r['node0_cpu_ms'] for r in good):.1f}")
                cells.append(f"{statistics.median(r['median_cpu_ms'] for r in good):.2f}")
                wrong = "" if all(r["all_correct"] for r in good) else "  WRONG RANKS"
                print(_row(cells) + wrong)
            for variant in ("rdzv", "rdzv-listen"):
                if variant in medians and "torch" in medians:
                    ratio = medians[variant] / medians["torch"]
                    print(f"{where:8} {n:>4} ratio {variant}/torch = {ratio:.3f}")


if __name__ == "__main__":
    main()
