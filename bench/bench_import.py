"""CPU cost of importing rdzv: an import line's user + system time above a bare interpreter.

Each sample is one child process (``python -c LINE``); its CPU time is read with
``resource.getrusage(RUSAGE_CHILDREN)`` around it. Lines and the bare interpreter
(``python -c pass``) alternate, so load that comes and goes touches both alike; the figure
is the median of a line's samples minus the median of the bare interpreter's.

Environments (``--env``):

* ``clean`` (the headline): a fresh virtual environment with nothing installed, and the
  source tree on ``PYTHONPATH``; what a wheel in an ordinary environment costs, since rdzv is
  standard library only.
* ``current``: this interpreter's own environment. A development venv with an editable
  install runs a ``.pth`` import hook at start-up that imports ``pathlib``, ``re``, ``enum``,
  ``urllib.parse`` and ``ipaddress`` before any line runs: those modules cost nothing above
  that bare interpreter.

Bytecode is compiled first (``compileall``), as ``pip install`` does; a tree run with
``PYTHONDONTWRITEBYTECODE=1`` compiles at every import and pays about twice as much. Also
printed: the modules outside ``rdzv`` each line imports beyond the bare interpreter's. The
run prints the load average before and after: on a shared machine the figures are noisy.

Usage: ``python bench/bench_import.py [--repeat 30] [--env clean current]``
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: label -> import line; the first is the bare interpreter every other line is measured above.
LINES = {
    "bare interpreter": "pass",
    "import rdzv": "import rdzv",
    "from rdzv import StaticTCPRendezvous": "from rdzv import StaticTCPRendezvous",
    "from rdzv import create_handler": "from rdzv import create_handler",
    "from rdzv import TCPStore": "from rdzv import TCPStore",
}
BARE = "bare interpreter"
GOAL_MS = 25.0
HEADLINE = "from rdzv import StaticTCPRendezvous"


def cpu_of(python: str, line: str, env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one child running ``python -c line``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "-c", line], env=env, check=True, stdin=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def modules_of(python: str, line: str, env: dict[str, str]) -> set[str]:
    """The names in ``sys.modules`` after ``line`` in a fresh ``python``."""
    code = f"{line}\nimport sys\nsys.stdout.write(' '.join(sys.modules))"
    done = subprocess.run([python, "-c", code], env=env, check=True, capture_output=True)
    return set(done.stdout.decode().split())


def measure(python: str, env: dict[str, str], repeat: int) -> dict[str, list[float]]:
    """``repeat`` CPU samples of every line, interleaved."""
    samples: dict[str, list[float]] = {label: [] for label in LINES}
    for line in LINES.values():  # warm the page cache and any bytecode once
        cpu_of(python, line, env)
    for _ in range(repeat):
        for label, line in LINES.items():
            samples[label].append(cpu_of(python, line, env))
    return samples


def report(name: str, python: str, env: dict[str, str], repeat: int) -> float:
    """Measure and print one environment; return the headline line's ms above bare."""
    print(f"\n== {name}: {python}")
    samples = measure(python, env, repeat)
    bare = statistics.median(samples[BARE]) * 1000
    baseline = modules_of(python, "pass", env)
    headline = 0.0
    print(f"  {'line':<40} {'median ms':>9} {'above bare':>10}  (quartiles above bare)")
    for label, values in samples.items():
        ms = sorted(v * 1000 for v in values)
        median = statistics.median(ms)
        q1, _, q3 = statistics.quantiles(ms, n=4)
        above = median - bare
        if label == HEADLINE:
            headline = above
        shown = "" if label == BARE else f"{above:10.1f}  ({q1 - bare:.1f}-{q3 - bare:.1f})"
        print(f"  {label:<40} {median:9.1f} {shown}")
    for label, line in LINES.items():
        if label == BARE:
            continue
        extra = modules_of(python, line, env) - baseline
        outside = sorted(m for m in extra if not m.startswith("rdzv"))
        print(f"  {label}: {len(outside)} modules outside rdzv: {' '.join(outside)}")
    verdict = "met" if headline <= GOAL_MS else "MISSED"
    print(f"  headline: {headline:.1f} ms above bare (goal <= {GOAL_MS:.0f} ms: {verdict})")
    return headline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="samples per line (30)")
    parser.add_argument(
        "--env", nargs="+", choices=("clean", "current"), default=["clean", "current"]
    )
    args = parser.parse_args(argv)
    compileall.compile_dir(REPO_ROOT / "rdzv", quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="rdzv-import-bench-") as tmp:
        for name in args.env:
            if name == "clean":
                # The base interpreter, not a venv's: a venv's python is a symlink to it.
                venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp)
                python = str(Path(tmp) / "bin" / "python")
            else:
                python = sys.executable
            report(name, python, env, args.repeat)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
