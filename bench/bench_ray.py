"""The Ray world's cost: N nodes start, rendezvous and are reported, on Ray and locally.

A fault-free scenario of N nodes (default 256 and 1024) runs once in the Ray world on a
local Ray bound to 127.0.0.1 (started once, before the first run: its start-up is a row of
its own) and, for comparison, once in the local world (a process per node, each through its
own proxy link). Each row is timed from the run's start until its report is written (console
line, JUnit and HTML): the world's build (placement group, actors, proxy agents, links) is
inside it. ``rendezvous`` is the report's own duration: from the first node's start to the
last outcome. The load average is printed with the figures (the machine may be shared).

Usage: ``python bench/bench_ray.py [--nodes 256 1024] [--local 256] [--pack K]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness.report.html import write_html
from harness.report.junit import write_junit
from harness.report.text import result_line
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import parse
from harness.scenario.model import Scenario
from harness.world.ray.groups import default_pack, plan
from harness.world.ray.session import connect


def _scenario(nodes: int, world: str, pack: int | None) -> Scenario:
    return parse(
        {
            "name": f"bench-{world}-{nodes}",
            "description": f"{nodes} nodes rendezvous in the {world} world",
            "nodes": nodes,
            "world": world,
            "pack": pack,
            "timeouts": {"join": 120},
        },
        "<bench_ray>",
    )


def _row(nodes: int, world: str, pack: int | None, out: Path) -> str:
    scenario = _scenario(nodes, world, pack)
    began = time.monotonic()
    report = run_one(scenario, embedded_proxy, 1)
    line = result_line(report)
    write_junit([report], out / f"{scenario.name}.xml")
    write_html([report], out / f"{scenario.name}.html")
    total = time.monotonic() - began
    if world == "ray":
        used = pack if pack is not None else default_pack(nodes, None)
        how = f"{len(plan(nodes, used))} actors ({used} nodes per actor)"
    else:
        how = f"{nodes} processes"
    verdict = "PASS" if report.passed else "FAIL"
    if not report.passed:
        print(line)
    return (
        f"| {world} | {nodes} | {how} | {total:.1f} s | {report.duration:.1f} s | "
        f"{total / nodes * 1000:.0f} ms | {verdict} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--local", type=int, nargs="*", default=[256])
    parser.add_argument("--pack", type=int, default=None)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    began = time.monotonic()
    session = connect(num_cpus=2)
    rows = [f"| Ray start (local, 127.0.0.1) | | | {time.monotonic() - began:.1f} s | | | |"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for nodes in args.local:
                rows.append(_row(nodes, "local", None, Path(tmp)))
            for nodes in args.nodes:
                rows.append(_row(nodes, "ray", args.pack, Path(tmp)))
    finally:
        session.close()
    print("| world | nodes | as | start to report | rendezvous | per node | result |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
