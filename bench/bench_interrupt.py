"""Ctrl-C at scale: how long ``harness run`` takes to exit after SIGINT, once every node of
an N-node scenario is running.

Each node runs the test backend ``waiting_backend:waiting`` (it reports in on a socket this
script listens on, then waits to be killed), so the SIGINT lands while all N processes are
alive. The time is from the signal to the harness process's exit (status 130), with the
JUnit and HTML reports written, as a user sees it. Goal: at most 1 s at 1024 nodes.

Usage: ``python bench/bench_interrupt.py [--nodes 256 1024] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = """\
name = "waits-forever-{n}"
description = "Every node reports in, then waits until the harness kills it."
seed = 13
nodes = {n}
backend = "waiting_backend:waiting"

[timeouts]
join = 600
"""


def interrupt_once(nodes: int, where: Path) -> float:
    """Seconds from SIGINT to the exit of a ``harness run`` of ``nodes`` waiting nodes."""
    scenario = where / f"forever-{nodes}.toml"
    scenario.write_text(SCENARIO.format(n=nodes))
    with socket.create_server(("127.0.0.1", 0), backlog=4096) as ready:
        ready.settimeout(900)
        path = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "harness")])
        env = {
            **os.environ,
            "PYTHONPATH": path,
            "HARNESS_TEST_READY_PORT": str(ready.getsockname()[1]),
        }
        # SIGINT back at its default action first, as at a terminal: a bench started in the
        # background of a non-interactive shell inherits it ignored, and the harness keeps
        # a signal its parent chose to ignore.
        unignore = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        unignore += "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
        command = [sys.executable, "-c", unignore, "-m", "harness.cli", "run", str(scenario)]
        command += ["--junit", str(where / "junit.xml"), "--html", str(where / "report.html")]
        with open(where / "out.txt", "wb") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            held = []
            try:
                held = [ready.accept()[0] for _ in range(nodes)]
                began = time.monotonic()
                proc.send_signal(signal.SIGINT)
                status = proc.wait(timeout=120)
                took = time.monotonic() - began
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for conn in held:
                    conn.close()
    if status != 130:
        raise SystemExit(f"harness run exited {status}, not 130: see {where / 'out.txt'}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        for nodes in args.nodes:
            times = [interrupt_once(nodes, Path(tmp)) for _ in range(args.repeat)]
            shown = ", ".join(f"{t:.2f}" for t in times)
            print(f"{nodes:5d} nodes: SIGINT -> exit {statistics.median(times):.2f} s ({shown})")
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
