"""Through the proxy vs direct, phase by phase, at 1k, 4k and 10k packed nodes (issue 29).

A fault-free scenario of N nodes packed ``--pack`` per process (node 0 a process of its own)
runs twice per N: every worker through its own proxy link (``via_proxy = true``, the
default) and straight to the store (``via_proxy = false``). Each row gives the phases:

* ``build``: the world's build (the store's port, the links: ``POST /populate`` in batches,
  the proxy processes past 2,048 links; on Ray also placement group, actors, agents);
* ``start``: every node started and ready at the start gate (the report's start-up less
  the build);
* ``release``: the release skew (first to last node to see the release);
* ``join``: from the release until the last node's ``joined`` event;
* ``run``: the report's duration (release to the last outcome, checks, teardown);
* ``report``: writing the JUnit and HTML reports;

then the whole run's wall time, its peak memory (summed PSS of this process and every
process below it: nodes, forkserver, proxy processes; on Ray, Ray's own processes are not
below it and are left out) and the ratio proxy / direct of the wall time. Goal: through the
proxy costs at most 1.5x direct at 10,240 nodes. The load average is printed with each row:
on a shared machine the figures say as much about the others as about the run.

Usage: ``python bench/bench_links.py [--nodes 1024 4096 10240] [--pack 512] [--world local]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_harness import MemorySampler

from harness.report.html import write_html
from harness.report.junit import write_junit
from harness.report.text import result_line
from harness.run.runner import run_scenario
from harness.run.suite import embedded_proxy
from harness.run.worlds import worlds_for
from harness.scenario.load import parse
from harness.scenario.model import Scenario

MIB = 1024 * 1024


def scenario(nodes: int, pack: int, via_proxy: bool, world: str) -> Scenario:
    how = "proxy" if via_proxy else "direct"
    return parse(
        {
            "name": f"bench-links-{nodes}-{how}",
            "description": f"{nodes} packed nodes, {how}",
            "nodes": nodes,
            "pack": pack,
            "world": world,
            "endpoint": {"via_proxy": via_proxy},
            "timeouts": {"join": 180, "hard": 300},
        },
        "<bench>",
    )


class _TimedBuild:
    """A world whose ``build`` is timed; everything else is the world's own."""

    def __init__(self, world: Any) -> None:
        self._world = world
        self.build_s = 0.0

    def build(self, seed: int) -> None:
        began = time.monotonic()
        try:
            self._world.build(seed)
        finally:
            self.build_s = time.monotonic() - began

    def __getattr__(self, name: str) -> Any:
        return getattr(self._world, name)


def one(sc: Scenario) -> dict[str, float]:
    """Run ``sc`` once; its phases in seconds (``nan`` when unknown)."""
    made: list[_TimedBuild] = []
    with tempfile.TemporaryDirectory(prefix="bench-links-") as out:
        began = time.monotonic()
        with MemorySampler(1.0) as memory, embedded_proxy() as client:
            factory = worlds_for(sc, client)

            def worlds(layout: Any, on_message: Any) -> Any:
                made.append(_TimedBuild(factory(layout, on_message)))
                return made[-1]

            report = run_scenario(sc, worlds, seed=1)
        written = time.monotonic()
        write_junit([report], Path(out) / "junit.xml")
        write_html([report], Path(out) / "report.html")
        ended = time.monotonic()
    joins = [e.t for o in report.outcomes for e in o.events if e.event == "joined"]
    build = made[0].build_s if made else float("nan")
    print(f"    {result_line(report)}", flush=True)
    for line in [report.error or "", *(v.message for v in report.violations)][:6]:
        if line:
            print(f"      {line[:600]}", flush=True)
    return {
        "passed": float(report.passed),
        "build": build,
        "start": (report.startup or float("nan")) - build,
        "release": report.release_skew if report.release_skew is not None else float("nan"),
        "join": max(joins) if joins else float("nan"),
        "run": report.duration,
        "report": ended - written,
        "wall": ended - began,
        "pss_mib": memory.peak_pss / MIB,
    }


def row(nodes: int, how: str, phases: dict[str, float]) -> str:
    verdict = "PASS" if phases["passed"] else "FAIL"
    shown = ", ".join(
        f"{k} {phases[k]:.2f} s" for k in ("build", "start", "release", "join", "run", "report")
    )
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"N={nodes} {how:6} {verdict}: {shown}; wall {phases['wall']:.1f} s;"
        f" peak PSS {phases['pss_mib']:.0f} MiB; load average {load}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[1024, 4096, 10240])
    parser.add_argument("--pack", type=int, default=512)
    parser.add_argument("--world", choices=["local", "ray"], default="local")
    args = parser.parse_args()
    session = None
    if args.world == "ray":
        from harness.world.ray.session import connect

        session = connect(None)
    try:
        for nodes in args.nodes:
            walls = {}
            for via_proxy in (True, False):
                how = "proxy" if via_proxy else "direct"
                phases = one(scenario(nodes, args.pack, via_proxy, args.world))
                walls[how] = phases["wall"]
                print(row(nodes, how, phases), flush=True)
            print(f"N={nodes}: proxy / direct wall {walls['proxy'] / walls['direct']:.2f}x")
    finally:
        if session is not None:
            session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
