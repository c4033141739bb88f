"""Static rendezvous wall time, rdzv vs torch, started the way users start it.

Rows (``--backends``; the first is the headline):

* ``rdzv``: torch's constructor form, ``StaticTCPRendezvous(host, port, rank, N, run_id,
  timeout)`` on every node; node 0 binds the port itself inside ``next_rendezvous()``,
  nothing is pre-bound, so the other nodes race node 0's bind (refused dials are retried).
* ``torch``: torch 2.13's ``StaticTCPRendezvous`` with the same arguments (its node 0 binds
  the port in ``next_rendezvous()`` too).
* ``rdzv-fd``: rdzv with ``listen_fd``: node 0 adopts a socket the trial bound (port 0, not
  listening yet), so early dials are refused and retried as above; a launcher that pre-binds
  the port takes this path. torch has no such option.

Method. Every trial runs in a fresh interpreter inside its own network namespace
(``unshare -n``, loopback up, no DNS server reachable, so torch pays no reverse-DNS stall),
which is also why the fixed port (``--port``, default 29500) is safe: nothing else lives in
that namespace, so no other process can take the port between trials or during one. (It
needs ``unshare``, i.e. root or user namespaces.) A trial pre-starts N node processes from a
forkserver that preloads the library, waits until every node built its handler, then names
a common start instant a little ahead (waking N sleepers through one event is serialised,
so the event only says "start at T"), and measures, on the system-wide monotonic clock,
from T to the last node's return from ``next_rendezvous()``. A node notes its return time
in shared memory (one write) and reports its figures only after the last node returned, so
reporting does not compete with nodes still joining; node processes stay alive until then,
so interpreter teardown is not timed either. ``idle %`` is the share of the machine's CPU
time left idle in that window (``/proc/stat``; near 0: the run was CPU-bound). Trials of the
backends are interleaved (load drift hits every backend alike); medians are printed, and
the ratio of each rdzv row to torch's median of the same run.

``--trace`` adds, for rdzv rows, where a node's time went (from the rdzv events, seconds
after the start instant, median / max over nodes): node 0 listening, connected, joined
(its ``add`` answered), complete (verdict read), returned; CPU ms spent by then; and
connect attempts. Logging the events costs the nodes some CPU: time without ``--trace``.
``--profile DIR`` writes a cProfile of ``next_rendezvous()`` of ranks 0, 1 and N-1 to DIR
(and, for rdzv's node 0, of the threads it starts: the store server).

Usage::

    python bench/bench_rendezvous.py                       # N = 8 64 256, 5 runs each
    python bench/bench_rendezvous.py --nodes 64 --repeat 3 --trace
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
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
_RDZV_PRELOAD = ["rdzv.rendezvous.static", "rdzv.store.client", "rdzv.rendezvous.registry"]
PRELOAD = {
    "rdzv": _RDZV_PRELOAD,
    "rdzv-fd": _RDZV_PRELOAD,
    "torch": ["torch.distributed", "torch.distributed.elastic.rendezvous.static_tcp_rendezvous"],
}
_TRACED = ("server_listening", "connected", "joined", "complete")


# -- one node ------------------------------------------------------------------------------


class _Trace(logging.Handler):
    """Keeps the monotonic time of the first of each traced rdzv event, and the attempts."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.at: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.cpu0 = 0.0
        self.attempts = 0
        self.offset = time.time() - time.monotonic()

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, "rdzv_event", None)
        if not isinstance(payload, dict):
            return
        name = payload["event"]
        if name in _TRACED and name not in self.at:
            self.at[name] = record.created - self.offset
            self.cpu[name] = time.process_time() - self.cpu0
        if name == "connected":
            self.attempts = int(payload["attempts"])


def _handler(backend: str, rank: int, n: int, port: int, timeout: float, listen: Any) -> Any:
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
    """A node process: build the handler, say ready, wait for the release, rendezvous, note
    when it returned (one write to shared memory), and report only after the measurement."""
    try:
        handler = _handler(backend, rank, n, port, timeout, listen)
        trace = None
        if options["trace"] and backend != "torch":
            trace = _Trace()
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
        late = time.monotonic() - start_at.value
        if late < 0:
            time.sleep(-late)  # every node starts at the same instant, not in wake-up order
        cpu = time.process_time()
        if trace is not None:
            trace.cpu0 = cpu
        if profiler is not None:
            profiler.enable()
        info = handler.next_rendezvous()
        returned = time.monotonic()
        cpu = time.process_time() - cpu
        returned_at[rank] = returned
        if profiler is not None:
            profiler.disable()
            path = os.path.join(options["profile"], f"{backend}-{n}-rank{rank}")
            profiler.dump_stats(path + ".prof")
            if threads is not None and rank == 0 and backend != "torch":
                threads.dump_stats(path + "-threads.prof")
        ok = (info.rank, info.world_size) == (rank, n)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = {"t": returned, "ok": ok, "rss_kib": rss, "cpu": cpu}
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
    ctx.set_forkserver_preload(PRELOAD[backend])
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
        start = time.monotonic() + 0.3 + n * 0.004
        start_at.value = start
        go.set()
        time.sleep(max(start - time.monotonic(), 0.0))
        idle = _idle_seconds()
        deadline = start + timeout
        # Nodes report after the measurement: until then, only look at shared memory.
        while not all(returned_at[:]) and time.monotonic() < deadline:
            time.sleep(0.002)
        idle = _idle_seconds() - idle
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
        summary["cpu_idle_pct"] = 100 * idle / ((last - start) * (os.cpu_count() or 1))
        if options["trace"] and backend != "torch":
            summary["trace"] = _trace_summary(results, start)
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


def _idle_seconds() -> float:
    """Seconds every CPU of the machine spent idle since boot (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


def _trace_summary(results: dict[int, dict[str, Any]], start: float) -> dict[str, Any]:
    """Median and max over nodes of each traced instant (seconds after the start)."""
    traces = [p["trace"] for p in results.values()]
    summary: dict[str, Any] = {}
    listening = results[0]["trace"].get("server_listening")
    if listening is not None:
        summary["node0 listening"] = round(listening - start, 4)
    for name in ("connected", "joined", "complete"):
        times = [t[name] - start for t in traces if name in t]
        if times:
            summary[name] = (round(statistics.median(times), 4), round(max(times), 4))
    returned = [p["t"] - start for p in results.values()]
    summary["returned"] = (round(statistics.median(returned), 4), round(max(returned), 4))
    for name in ("connected", "joined", "complete"):
        spent = [t[f"cpu {name}"] * 1000 for t in traces if f"cpu {name}" in t]
        if spent:
            summary[f"cpu ms {name}"] = (round(statistics.median(spent), 2), round(max(spent), 2))
    attempts = [t["attempts"] for t in traces]
    summary["attempts"] = (statistics.median(attempts), max(attempts))
    return summary


# -- orchestration -------------------------------------------------------------------------


def run_trial(
    backend: str, n: int, port: int, timeout: float, options: dict[str, Any]
) -> dict[str, Any]:
    me = [sys.executable, os.path.abspath(__file__), "--trial", backend, str(n), str(port)]
    me += ["--timeout", str(timeout), "--options", json.dumps(options)]
    inner = "ip link set lo up && exec " + " ".join(shlex.quote(a) for a in me)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    )
    try:
        done = subprocess.run(
            ["unshare", "-n", "sh", "-c", inner],
            capture_output=True,
            text=True,
            timeout=timeout * 3,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"trial exceeded {timeout * 3:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


_WIDTHS = (5, 8, 9, 30, 10, 9, 13, 12, 7)


def _row(cells: list[str]) -> str:
    return " ".join(cell.rjust(width) for cell, width in zip(cells, _WIDTHS, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", nargs="+", default=["rdzv", "torch", "rdzv-fd"])
    parser.add_argument("--port", type=int, default=29500, help="the fixed port (in the netns)")
    parser.add_argument("--timeout", type=float, default=120.0, help="bound of each trial (s)")
    parser.add_argument("--trace", action="store_true", help="where rdzv nodes' time went")
    parser.add_argument("--profile", metavar="DIR", help="cProfile ranks 0, 1, N-1 into DIR")
    parser.add_argument(
        "--trial", nargs=3, metavar=("BACKEND", "N", "PORT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--options", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        backend, n, port = args.trial[0], int(args.trial[1]), int(args.trial[2])
        options = json.loads(args.options)
        print(json.dumps(trial(backend, n, port, args.timeout, options)), flush=True)
        return
    unknown = sorted(set(args.backends) - set(PRELOAD))
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {sorted(PRELOAD)}")
    profile = None
    if args.profile:
        profile = os.path.abspath(args.profile)
        os.makedirs(profile, exist_ok=True)
    options = {"trace": args.trace, "profile": profile}
    header = ["N", "backend", "median s", "runs (s)", "node0 MiB", "node MiB"]
    header += ["node0 CPU ms", "node CPU ms", "idle %"]
    print(_row(header), flush=True)
    for n in args.nodes:
        medians: dict[str, float] = {}
        runs_of: dict[str, list[dict[str, Any]]] = {b: [] for b in args.backends}
        for _ in range(args.repeat):  # interleaved, so load drift hits every backend alike
            for backend in args.backends:
                runs_of[backend].append(run_trial(backend, n, args.port, args.timeout, options))
        for backend, runs in runs_of.items():
            good = [r for r in runs if "seconds" in r]
            for r in runs:
                if "error" in r:
                    print(f"N={n} {backend} ERROR {r['error']}")
            if not good:
                continue
            medians[backend] = statistics.median(r["seconds"] for r in good)
            cells = [str(n), backend, f"{medians[backend]:.3f}"]
            cells.append(", ".join(f"{r['seconds']:.3f}" for r in good))
            cells.append(f"{max(r['node0_peak_rss_mib'] for r in good):.1f}")
            cells.append(f"{max(r['median_peak_rss_mib'] for r in good):.1f}")
            cells.append(f"{statistics.median(r['node0_cpu_ms'] for r in good):.1f}")
            cells.append(f"{statistics.median(r['median_cpu_ms'] for r in good):.2f}")
            cells.append(f"{statistics.median(r['cpu_idle_pct'] for r in good):.0f}")
            wrong = "" if all(r["all_correct"] for r in good) else "  WRONG RANKS"
            print(_row(cells) + wrong, flush=True)
            for r in good:
                if "trace" in r:
                    print(f"      trace {backend} N={n}: {r['trace']}", flush=True)
        for variant in ("rdzv", "rdzv-fd"):
            if variant in medians and "torch" in medians:
                ratio = medians[variant] / medians["torch"]
                print(f"{n:>5} ratio {variant}/torch = {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
