"""A/B of a member's CPU inside one run: two checkouts of rdzv, half the members each.

A member's first join costs about a millisecond of CPU, and run-to-run noise on a shared
2-core machine is larger than most changes to it: comparing runs of A with runs of B
measures the machine. Here every run starts N nodes as fresh processes (``python -c`` with
the user's import line, ``from rdzv import StaticTCPRendezvous``, done before the start),
node 0 and the even ranks from checkout A, the odd ranks from checkout B, all released at
one instant (node 0 0.1 s ahead, listening on a socket this script bound to port 0), and
compares the median thread CPU of A's members with B's, which shared the same run, the same
node 0 and the same load. The figure is the median over runs of B/A (an A/A run prints
about 1.00 +- 0.02 here). With ``--straight`` B's members run the happy path written
straight (:mod:`_straight_member`; both kinds of member build the same handler first):
what a compact member path could cost at best; with ``--straight --pipelined`` that path
sends its claims with the handshake (one round trip fewer: what that protocol change would
save a member).

    python bench/ab_member.py --b /path/to/other/checkout --nodes 64 --runs 8
    python bench/ab_member.py --straight --nodes 64 --runs 8
    python bench/ab_member.py --straight --pipelined --nodes 64 --runs 8
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

_NODE = r"""
import os, sys, time
from rdzv import StaticTCPRendezvous
rank, n, port, fd, straight = (int(a) for a in sys.argv[1:6])
if straight:  # --straight (2: --pipelined): this member runs bench/_straight_member.py
    sys.path.insert(0, sys.argv[6])
    from _straight_member import join
os.write(1, b"ready\n")
start = float(sys.stdin.readline()) - (0.1 if rank == 0 else 0.0)
while time.monotonic() < start - 0.002:
    time.sleep(0.0005)
while time.monotonic() < start:
    pass
began = time.thread_time_ns()
handler = StaticTCPRendezvous(
    "127.0.0.1", port, rank, n, "ab", 60, listen_fd=fd if rank == 0 else None
)
if straight:
    join("127.0.0.1", port, rank, n, "ab", 60, pipelined=straight == 2)
else:
    info = handler.next_rendezvous()
    assert (info.rank, info.world_size) == (rank, n)
cpu = (time.thread_time_ns() - began) / 1e6
sys.stdin.readline()  # report after every node returned: not timed
os.write(1, b"%.4f\n" % cpu)
handler.shutdown()
"""


def _run(n: int, a: str, b: str, straight: int) -> tuple[float, float]:
    """One run of ``n`` nodes; the median CPU (ms) of A's members and of B's."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port, fd = listener.getsockname()[1], listener.fileno()
    nodes = []
    bench = Path(__file__).parent  # where a --straight member imports _straight_member from
    try:
        for rank in range(n):
            b_straight = straight if rank % 2 == 1 else 0
            env = {"PYTHONPATH": b if rank % 2 else a, "PATH": os.environ.get("PATH", "")}
            nodes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        _NODE,
                        *map(str, (rank, n, port, fd, b_straight, bench)),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                    cwd="/",  # `python -c` puts the working directory first on sys.path
                    text=True,
                    pass_fds=(fd,) if rank == 0 else (),
                )
            )
        listener.close()  # node 0 holds its own copy
        for node in nodes:
            if node.stdout is None or node.stdout.readline().strip() != "ready":
                raise RuntimeError("a node did not start")
        start = time.monotonic() + 0.3 + n * 0.002
        for node in nodes:
            assert node.stdin is not None
            node.stdin.write(f"{start:.6f}\n")
            node.stdin.flush()
        cpu = []
        for node in nodes:
            assert node.stdin is not None and node.stdout is not None
            node.stdin.write("report\n")
            node.stdin.flush()
            cpu.append(float(node.stdout.readline()))
        for node in nodes:
            node.wait(timeout=120)
    finally:
        listener.close()
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
    return statistics.median(cpu[2::2]), statistics.median(cpu[1::2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = str(Path(__file__).resolve().parent.parent)
    parser.add_argument("--a", default=here, help="checkout A (node 0 and even ranks)")
    parser.add_argument("--b", default=here, help="checkout B (odd ranks)")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument(
        "--straight",
        action="store_true",
        help="B's members run bench/_straight_member.py (the happy path written straight, "
        "with A's rdzv): what a compact member path could cost at best",
    )
    parser.add_argument(
        "--pipelined",
        action="store_true",
        help="with --straight: that path sends its claims with the handshake (one round "
        "trip fewer)",
    )
    args = parser.parse_args()
    if args.nodes < 5:
        parser.error("--nodes must be at least 5 (two members of each checkout)")
    if args.pipelined and not args.straight:
        parser.error("--pipelined is an option of --straight")
    straight = 2 if args.pipelined else int(args.straight)
    ratios = []
    for run in range(1, args.runs + 1):
        a, b = _run(args.nodes, args.a, args.b, straight)
        ratios.append(b / a)
        print(f"run {run}/{args.runs}: member CPU A {a:.3f} ms, B {b:.3f} ms, B/A {b / a:.3f}")
    print(f"B/A median of {len(ratios)} runs: {statistics.median(ratios):.3f} (N = {args.nodes})")


if __name__ == "__main__":
    main()
