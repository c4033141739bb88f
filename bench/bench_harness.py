"""Harness throughput: N nodes start, rendezvous and are reported; the whole scenario suite.

* ``nodes``: a fault-free scenario with N nodes (default 256 and 1024, one process each),
  each through its own proxy link, timed from the run's start until its report is written
  (console line, JUnit and HTML), with the whole run's memory: the peak, over the run, of
  the summed PSS and USS of the harness and every process it started (forkserver, nodes),
  sampled from ``/proc/<pid>/smaps_rollup`` every ``--sample`` seconds (the sampling costs
  some CPU; it is the same for every row). A sum of RSS would count the pages the node
  processes share with their forkserver once per node. Goals: 1024 nodes in < 30 s and
  < 8 GiB.
* ``packed``: the same with nodes packed K per process as threads (``--packed 4096
  --pack 512``), when the scenario format has ``pack``. Goal: 4096 nodes in < 60 s, < 8 GiB.
* every ``nodes`` and ``packed`` row also gives the start-up (every node started and ready
  at the start gate) and the release skew: first to last node to see the release, as the
  nodes observed it. Goals: skew <= 0.5 s at 1024 processes, <= 1 s at 4096 packed. Each
  run also prints how the nodes saw the release (:func:`release_profile`): quantiles of
  the times from the release, the same for each node's first rendezvous event (its
  ``join_start``: when its rendezvous began), by eighths of the node ids (the order they
  were started in), and the latest nodes.
* ``netns``: the start-up cost per node of the netns world against the local world: the
  same fault-free scenario (``--netns 256 1024``) in both, start -> reported, divided by
  N; and the netns network alone (namespaces, veths, bridge, addresses) built and removed.
  Needs root and nft (else the row says why). Goals: 256 nodes < 30 s, 1024 < 90 s.
* ``suite``: wall time of ``harness run scenarios/*.toml -j 2``. Goal: < 5 min.

Usage: ``python bench/bench_harness.py [--nodes 256 1024] [--packed 4096] [--pack 512]
[--netns 256 1024] [--repeat 2] [--no-suite]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.report.html import write_html
from harness.report.junit import write_junit
from harness.report.text import result_line
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse
from harness.scenario.model import Scenario

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc: children of each task)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def _pss_uss(pid: int) -> tuple[int, int]:
    """PSS and USS (private clean + dirty) of one process, in bytes (0, 0 if it is gone)."""
    fields: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[name] = int(parts[0]) * 1024
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


class MemorySampler:
    """The peak summed PSS and USS of this process and its descendants, sampled on a thread."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.peak_pss = self.peak_uss = self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            pids = _tree(os.getpid())
            pss = uss = 0
            for pid in pids:
                p, u = _pss_uss(pid)
                pss, uss = pss + p, uss + u
            if pss > self.peak_pss:
                self.peak_pss, self.peak_uss, self.peak_processes = pss, uss, len(pids)
            if self._stop.wait(self.every):
                return


def fault_free(n: int, pack: int | None = None) -> Scenario:
    data: dict[str, object] = {
        "name": f"bench-{n}" + (f"-pack{pack}" if pack else ""),
        "description": "fault-free",
        "nodes": n,
        "timeouts": {"join": 120},
    }
    if pack:
        data["pack"] = pack
    return parse(data, "<bench>")


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "none"
    at = [0.0, 0.5, 0.9, 0.99]
    shown = [
        f"p{int(q * 100)} {ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.3f}" for q in at
    ]
    return f"min {ordered[0]:.3f} " + " ".join(shown[1:]) + f" max {ordered[-1]:.3f}"


def release_profile(report: Any) -> list[str]:
    """How the nodes released together saw the release, from their events (seconds from
    the release): the distribution, its shape over the start order, and the latest nodes."""
    seen: dict[int, float] = {}
    began: dict[int, float] = {}
    for outcome in report.outcomes:
        for event in outcome.events:
            if event.event == "started" and outcome.node not in seen:
                seen[outcome.node] = event.t
            elif event.event == "join_start" and outcome.node not in began:
                began[outcome.node] = event.t
    if not seen:
        return []
    nodes = sorted(seen)
    eighth = max(1, len(nodes) // 8)
    parts = [nodes[i : i + eighth] for i in range(0, len(nodes), eighth)]
    shape = ", ".join(
        f"{part[0]}-{part[-1]}: {statistics.median(seen[n] for n in part):.3f}"
        f"/{max(seen[n] for n in part):.3f}"
        for part in parts
    )
    latest = sorted(seen, key=seen.__getitem__)[-6:]
    return [
        f"    saw the release (s after it): {_quantiles(list(seen.values()))}",
        f"    began the rendezvous (join_start): {_quantiles(list(began.values()))}",
        f"    by node ids (median/max): {shape}",
        "    latest: " + ", ".join(f"node {n} {seen[n]:.3f}" for n in latest),
    ]


def bench_nodes(n: int, repeat: int, sample: float, pack: int | None = None) -> None:
    try:
        scenario = fault_free(n, pack)
    except Exception as exc:
        print(f"N={n} pack {pack}: not run ({exc})".replace("\n", " "))
        return
    label = f"N={n}" + (f" packed {pack} per process" if pack else " (one process per node)")
    walls, pss, uss, skews = [], [], [], []
    for r in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-harness-") as out:
            start = time.monotonic()
            with MemorySampler(sample) as memory:
                report = run_one(scenario, embedded_proxy, seed=r)
            line = result_line(report)
            write_junit([report], Path(out) / "junit.xml")
            write_html([report], Path(out) / "report.html")
            walls.append(time.monotonic() - start)
            html_kib = (Path(out) / "report.html").stat().st_size / 1024
        pss.append(memory.peak_pss)
        uss.append(memory.peak_uss)
        skew = report.release_skew if report.release_skew is not None else float("nan")
        skews.append(skew)
        if not report.passed:
            print(f"  run {r} FAILED: {line}")
        print(
            f"  {label} run {r}: start -> reported {walls[-1]:.2f} s (start-up"
            f" {report.startup or 0:.2f} s, release skew {skew:.3f} s, run from the release"
            f" {report.duration:.2f} s, HTML {html_kib:.0f} KiB);"
            f" peak PSS {memory.peak_pss / MIB:.0f} MiB, USS"
            f" {memory.peak_uss / MIB:.0f} MiB over {memory.peak_processes} processes;"
            f" load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
            flush=True,
        )
        for line in release_profile(report):
            print(line, flush=True)
    per_node = statistics.median(pss) / n / MIB
    print(
        f"{label}: median start -> reported {statistics.median(walls):.2f} s over {repeat} runs;"
        f" whole-run peak PSS {statistics.median(pss) / MIB:.0f} MiB ({per_node:.1f} MiB per"
        f" node), USS {statistics.median(uss) / MIB:.0f} MiB; release skew median"
        f" {statistics.median(skews):.3f} s, max {max(skews):.3f} s; load average"
        f" {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def bench_netns(n: int, repeat: int) -> None:
    from harness.world.netns.naming import run_id
    from harness.world.netns.network import Network
    from harness.world.netns.shell import why_not

    why = why_not()
    if why is not None:
        print(f"netns N={n}: not run ({why})")
        return
    per_world = {}
    for world in ("local", "netns"):
        scenario = fault_free(n).in_world(world)
        walls = []
        for r in range(repeat):
            start = time.monotonic()
            report = run_one(scenario, embedded_proxy, seed=r)
            walls.append(time.monotonic() - start)
            if not report.passed:
                print(f"  {world} N={n} run {r} FAILED: {result_line(report)}")
        per_world[world] = statistics.median(walls)
    builds, removes = [], []
    for r in range(repeat):
        network = Network(run_id(f"bench-{n}-{r}-{time.time_ns()}"), n)
        start = time.monotonic()
        network.build()
        builds.append(time.monotonic() - start)
        start = time.monotonic()
        network.teardown()
        removes.append(time.monotonic() - start)
    local, netns = per_world["local"], per_world["netns"]
    print(
        f"netns N={n}: start -> reported {netns:.2f} s ({netns / n * 1000:.1f} ms per node)"
        f" against the local world's {local:.2f} s ({local / n * 1000:.1f} ms per node),"
        f" x{netns / local:.2f}; the network alone: built in {statistics.median(builds):.2f} s"
        f" ({statistics.median(builds) / n * 1000:.2f} ms per node), removed in"
        f" {statistics.median(removes):.2f} s; median of {repeat}"
    )


def bench_suite() -> None:
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").glob("*.toml"))
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", *files, "-j", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    tail = result.stdout.strip().splitlines()[-1:] if result.stdout else []
    print(f"suite: harness run scenarios/*.toml -j 2: {wall:.1f}s, exit {result.returncode} {tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--packed", type=int, nargs="*", default=[4096])
    parser.add_argument("--pack", type=int, default=512, help="nodes per process when packed")
    parser.add_argument("--netns", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sample", type=float, default=1.0, help="memory sampling period, s")
    parser.add_argument("--no-suite", action="store_true")
    args = parser.parse_args()
    for n in args.nodes:
        bench_nodes(n, args.repeat, args.sample)
    for n in args.packed:
        bench_nodes(n, args.repeat, args.sample, pack=args.pack)
    for n in args.netns:
        bench_netns(n, args.repeat)
    if not args.no_suite:
        bench_suite()
    return 0


if __name__ == "__main__":
    sys.exit(main())
