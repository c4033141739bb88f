"""Job scenarios: N torchrun agents, one gloo worker each, all-reduce (scenarios/jobs/J00 at
other sizes), per rendezvous backend.

Each row gives, apart (issue 27's budgets: 4 nodes under 20 s, 16 nodes under 60 s, on 2
cores):

* ``start-up``: from the run's start until every node is ready at the start gate: the
  forkserver importing torch once, each node process started from it (the job's torch
  import, paid once per node machine in the field);
* ``scenario``: the scenario's own clock, from the release until the last node reported
  (agents rendezvous, start their workers, the workers import what torch's launcher left
  to import, ``init_process_group``, all-reduce, exit);
* ``wall``: start -> reported, both and the teardown;
* the load average when the row ended (the figures mean little on a loaded machine).

Usage: ``python bench/bench_jobs.py [--nodes 4 16] [--backends static torch-static
torch-c10d] [--repeat 1]``. Needs torch (``pip install -e '.[torch]'``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from harness.report.text import result_line
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse
from harness.scenario.model import Scenario

BACKENDS = ("static", "torch-static", "torch-c10d")


def job(n: int, backend: str) -> Scenario:
    """``n`` agents, one default gloo worker each; every worker must hold the right sum."""
    data: dict[str, object] = {
        "name": f"bench-job-{n}",
        "description": "fault-free torchrun job",
        "nodes": n,
        "backend": backend,
        "timeouts": {"join": 60, "hard": 300},
        "job": {"nproc_per_node": 1},
        "expect": {"outcome": "ok"},
    }
    return parse(data, "<bench>")


def bench(n: int, backend: str, repeat: int) -> bool:
    """Print one row; whether every run passed."""
    walls, startups, scenarios = [], [], []
    passed = True
    for r in range(repeat):
        start = time.monotonic()
        report = run_one(job(n, backend), embedded_proxy, seed=r)
        walls.append(time.monotonic() - start)
        if report.skipped:
            print(f"N={n} {backend}: not run ({report.skipped})", flush=True)
            return True
        startups.append(report.startup or 0.0)
        scenarios.append(report.duration)
        if not report.passed:
            passed = False
            print(f"  run {r} FAILED: {result_line(report)}", flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"N={n:<3} {backend:<13} start-up {statistics.median(startups):6.2f} s  scenario"
        f" {statistics.median(scenarios):6.2f} s  wall {statistics.median(walls):6.2f} s"
        f"  ({repeat} run(s), median; load average {load})",
        flush=True,
    )
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="*", default=[4, 16])
    parser.add_argument("--backends", nargs="*", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    ok = True
    for n in args.nodes:
        for backend in args.backends:
            ok = bench(n, backend, args.repeat) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
