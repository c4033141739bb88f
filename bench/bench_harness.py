"""Harness throughput: N nodes start, rendezvous and report; the whole scenario suite.

* ``nodes``: a fault-free scenario with N nodes (default 64 and 256), each through its own
  proxy link, timed from the run's start to the last node's report, with the peak RSS of a
  node process (each node reports its own ``ru_maxrss``). Goal: 64 nodes in < 3 s.
* ``suite``: wall time of ``harness run scenarios/ -j 2``. Goal: < 5 min.

Usage: ``python bench/bench_harness.py [--nodes 64 256] [--repeat 3] [--no-suite]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.run.runner import run_scenario
from harness.scenario.load import parse
from harness.world.local import LocalWorlds

ROOT = Path(__file__).resolve().parent.parent


def bench_nodes(client: ToxiproxyClient, n: int, repeat: int) -> None:
    scenario = parse(
        {"name": f"bench-{n}", "description": "fault-free", "nodes": n, "timeouts": {"join": 60}},
        "<bench>",
    )
    walls, rss = [], []
    for r in range(repeat):
        start = time.monotonic()
        report = run_scenario(scenario, LocalWorlds(client), seed=r)
        walls.append(time.monotonic() - start)
        if not report.passed:
            print(f"  run {r} FAILED: {[v.message for v in report.violations][:3]}")
        rss += [o.maxrss_kib for o in report.outcomes if o.maxrss_kib]
        last = max(o.finished or 0 for o in report.outcomes)
        print(f"  N={n} run {r}: wall {walls[-1]:.2f}s (last report at {last:.2f}s)", flush=True)
    print(
        f"N={n}: median wall {statistics.median(walls):.2f}s over {repeat} runs; "
        f"peak RSS per node median {statistics.median(rss) / 1024:.1f} MiB, "
        f"max {max(rss) / 1024:.1f} MiB"
    )


def bench_suite() -> None:
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "harness", "run", "scenarios/", "-j", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    tail = result.stdout.strip().splitlines()[-1:] if result.stdout else []
    print(f"suite: harness run scenarios/ -j 2: {wall:.1f}s, exit {result.returncode} {tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-suite", action="store_true")
    args = parser.parse_args()
    with ToxiproxyServer() as server:
        client = ToxiproxyClient(server.host, server.port)
        for n in args.nodes:
            bench_nodes(client, n, args.repeat)
    if not args.no_suite:
        bench_suite()
    return 0


if __name__ == "__main__":
    sys.exit(main())
