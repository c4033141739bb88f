"""Static rendezvous wall time, rdzv vs torch, started the way users start it.

Rows: one per backend (``--backends``) and way of starting (``--start``); the headline is
``rdzv imported``, the user's path: torch's constructor form, node 0 binding its own port,
all nodes released together, nothing preloaded beyond the user's import line.

Backends:

* ``rdzv``: torch's constructor form, ``StaticTCPRendezvous(host, port, rank, N, run_id,
  timeout)`` on every node; node 0 binds the port itself inside ``next_rendezvous()``,
  nothing is pre-bound, so the other nodes race node 0's bind (refused dials are retried).
* ``torch``: torch 2.13's ``StaticTCPRendezvous`` with the same arguments (its node 0 binds
  the port in ``next_rendezvous()`` too).
* ``rdzv-fd`` (``warm`` rows only): rdzv with ``listen_fd``: node 0 adopts a socket the
  trial bound (port 0, not listening yet), so early dials are refused and retried as above;
  a launcher that pre-binds the port takes this path. torch has no such option.

Ways of starting (``--start``, see ``bench/_processes.py``), timed from the release to the
last node's return:

* ``imported``: the forkserver imported the user's import line (``from rdzv import
  StaticTCPRendezvous``; torch: ``torch.distributed`` and its static rendezvous module), as
  a launcher that imports the user's module, or a top-of-file import, does; the constructor
  and ``next_rendezvous()`` are timed (rdzv's hosting node imports the store server in its
  constructor).
* ``fresh``: nothing of either library imported before the release (node processes forked
  from a bare forkserver): import, constructor and rendezvous are timed, in every node at
  once. torch's nodes each import torch privately (~0.3 GiB each): rows the machine cannot
  hold are ``not run``.
* ``warm``: everything imported and the handler built before the release; only
  ``next_rendezvous()`` is timed.

Before the first trial, rdzv is compiled to bytecode (``compileall``), as ``pip install``
does: a source tree run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
module in every node (torch's wheel ships compiled).

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
time left idle in that window (the cpuidle states' residency, in microseconds, else
``/proc/stat``, whose 10 ms ticks are too coarse for such a window; near 0: the run was
CPU-bound). Trials of the backends are interleaved (load drift hits every backend alike);
medians are printed with every run's time.

torch's start is bimodal: when no worker's first connect races node 0's bind it returns in
0.01-0.2 s, otherwise its refused client backs off and it takes 0.4-0.8 s. Each torch trial
is classified by what the kernel of the trial's namespace counted (``refused``: connects
answered with a reset, ``bench/_tcpstats.py``; printed per trial for every backend), and
the two modes get rows of their own (``torch fast k/n``, ``torch slow k/n``). The headline
ratio is rdzv's median against torch's fast mode (issue 25's goal: <= 1.0 at N = 64 and
256, ``imported``), printed beside the ratios to the median of all torch trials and to its
slow mode; how reliably it holds is the line after it: in how many rounds rdzv's trial was
not slower than torch's of the same round (torch's fast ones; the trials of one round are
interleaved, so they shared the machine's load), and the spread of those per-round ratios.
When fewer than ``--torch-fast`` (3) torch trials fell on the fast mode, more
rounds of every backend run, up to ``--torch-fast-rounds`` (15) in all. On a loaded machine
torch's node 0 rarely wins the race at N >= 64 (0 of 15 trials at load average 20-50):
``--node0-ahead S`` starts node 0 S seconds before the others and times from theirs, which
makes the fast mode by construction (every backend alike; a second row, never the headline).

Scale (``--nodes``, default 8 64 256 1024: one process per node as above; ``--packed``,
default 4096: the nodes as threads in ``--procs`` processes, 8 by default, each thread with
its own handler in the same constructor form and its own store connection, see
``bench/_packed.py``; the ``rdzv-fd`` backend has no packed row). Every row prints the total
memory of the node processes (sum of PSS, ``/proc/<pid>/smaps_rollup``; see
``bench/_memory.py``), the load average of the machine, and the goals of issue 12 (met /
MISSED). A backend whose N node processes would need more than half of the memory the
machine has available (private memory per node measured earlier in the run, else assumed)
is not run, and the row says ``not run (why)``.

``--trace`` adds, for rdzv rows, where a node's time went (from the rdzv events, seconds
after the start instant, median / max over nodes): node 0 listening, connected, joined
(its ``add`` answered), complete (verdict read), returned; CPU ms spent by then; and
connect attempts. Logging the events costs the nodes some CPU: time without ``--trace``.
``--profile DIR`` writes a cProfile of ``next_rendezvous()`` of ranks 0, 1 and N-1 to DIR
(and, for rdzv's node 0, of the threads it starts: the store server).

Usage::

    python bench/bench_rendezvous.py                  # N = 8 64 256 1024, packed 4096; 5 runs
    python bench/bench_rendezvous.py --nodes 64 256 --packed --start imported --repeat 5
    python bench/bench_rendezvous.py --nodes 8 64 256 --packed --start imported fresh warm
    python bench/bench_rendezvous.py --nodes 64 --packed --repeat 3 --trace
    python bench/bench_rendezvous.py --nodes --packed 4096 --procs 16 --backends rdzv
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import statistics
import subprocess
import sys
from typing import Any

import _memory
import _packed
import _processes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# -- orchestration -------------------------------------------------------------------------


#: Private memory (USS) of one node process, in MiB, assumed until this run measured it
#: (measured at N = 128 on the 2-core box: torch 8.0, rdzv 9.1; torch's node is ~150 MiB
#: resident, but most of it is shared with the forkserver that preloaded torch).
_GUESS_NODE_MIB = {"torch": 10.0, "rdzv": 10.0, "rdzv-fd": 10.0}
#: ... and a fresh node's, which imports the library privately (torch: measured ~300).
_GUESS_FRESH_MIB = {"torch": 320.0, "rdzv": 12.0, "rdzv-fd": 12.0}
#: Goals: (rdzv / torch) <= 0.5 at these N, per way of starting (issue 12: warm; issue 17:
#: imported); seconds at N = 1024; packed 4096: s, MiB.
_RATIO_GOAL, _SECONDS_GOAL, _PACKED_GOAL = 0.5, {1024: 10.0}, {4096: (30.0, 4096.0)}
_RATIO_GOAL_AT = {"warm": (8, 64, 256), "imported": (64, 256)}
#: Issue 25: rdzv's real barrier no slower than torch's fast, no-barrier return (<= 1.0x).
_FAST_GOAL_AT = {"imported": (64, 256)}


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


def too_big(backend: str, start: str, n: int, node_mib: dict[str, float]) -> str | None:
    """Why ``n`` node processes of ``backend`` started ``start`` are not run here (None: they
    are): their private memory would exceed half of what this shared machine has available."""
    key = f"{backend} {start}"
    guess = (_GUESS_FRESH_MIB if start == "fresh" else _GUESS_NODE_MIB)[backend]
    per_node = node_mib.get(key, guess)
    basis = "measured in this run" if key in node_mib else "assumed, not yet measured"
    need, available = n * per_node, _memory.available_mib()
    if need <= available / 2:
        return None
    return (
        f"{n} processes x {per_node:.0f} MiB private each ({basis}) = {need / 1024:.1f} GiB, "
        f"more than half of the {available / 1024:.1f} GiB available on this shared machine"
    )


_WIDTHS = (5, 18, 9, 30, 10, 9, 13, 12, 7, 8, 12)


def _row(cells: list[str]) -> str:
    return " ".join(cell.rjust(width) for cell, width in zip(cells, _WIDTHS, strict=True))


def _print_runs(label: str, backend: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    good = [r for r in runs if "seconds" in r]
    for r in runs:
        if "error" in r:
            print(f"{label} {backend} ERROR {r['error']}", flush=True)
    return good


def torch_mode(run: dict[str, Any]) -> str:
    """``fast`` or ``slow``: which of torch's two starts a trial fell on. Observed, not guessed
    from the time: slow when a worker's connect was refused (it raced node 0's bind, and
    torch's client backs off after a refusal), as the kernel of the trial's own namespace
    counted (``bench/_tcpstats.py``); by the time (0.3 s) only where the kernel has no count."""
    refused = run.get("tcp", {}).get("refused")
    if refused is None:
        return "slow" if run["seconds"] > 0.3 else "fast"
    return "slow" if refused else "fast"


def _wants_fast(runs: list[dict[str, Any]] | None, rounds: int, args: argparse.Namespace) -> bool:
    """Whether to run another round for torch's fast mode: fewer than ``--torch-fast`` of
    its trials fell on it, and fewer than ``--torch-fast-rounds`` rounds ran."""
    if runs is None or rounds >= args.torch_fast_rounds:
        return False
    fast = sum(1 for r in runs if "seconds" in r and torch_mode(r) == "fast")
    return fast < args.torch_fast


def _print_row(n: int, key: str, good: list[dict[str, Any]]) -> float:
    """One table row for the trials ``good`` (with times); returns their median time."""
    median = statistics.median(r["seconds"] for r in good)
    cells = [str(n), key, f"{median:.3f}"]
    cells.append(", ".join(f"{r['seconds']:.3f}" for r in good))
    cells.append(f"{max(r['node0_peak_rss_mib'] for r in good):.1f}")
    cells.append(f"{max(r['median_peak_rss_mib'] for r in good):.1f}")
    cells.append(f"{statistics.median(r['node0_cpu_ms'] for r in good):.1f}")
    cells.append(f"{statistics.median(r['median_cpu_ms'] for r in good):.2f}")
    cells.append(f"{statistics.median(r['cpu_idle_pct'] for r in good):.0f}")
    cells.append(f"{max(r['pss_mib'] for r in good):.0f}")
    refused = [str(r["tcp"]["refused"]) for r in good if "refused" in r.get("tcp", {})]
    cells.append(",".join(refused) or "-")
    wrong = "" if all(r["all_correct"] for r in good) else "  WRONG RANKS"
    print(_row(cells) + wrong, flush=True)
    return median


def print_split(n: int, backend: str, good: list[dict[str, Any]]) -> None:
    """``--trace``: where a node's CPU went (median over trials of the median node, and node
    0), every backend: building the handler, user and system time, voluntary context
    switches (a wait for a reply each), minor faults, garbage collections."""
    for who in ("node", "node0"):
        split = [r["split"][who] for r in good if "split" in r]
        if not split:
            continue
        m = {k: statistics.median(s[k] for s in split) for k in split[0]}
        print(
            f"      cpu {backend} N={n} {who}: built {m['built_ms']:.2f} ms, user "
            f"{m['user_ms']:.2f} ms, system {m['system_ms']:.2f} ms, {m['switches']:.0f} "
            f"switches, {m['faults']:.0f} faults, {m['collections']:.0f} collections",
            flush=True,
        )


def process_rows(n: int, start: str, args: argparse.Namespace, node_mib: dict[str, float]) -> None:
    """Trials at ``n`` (one process per node, started ``start``) of every backend,
    interleaved; one row each, torch's two modes apart, and the ratios."""
    options = {"trace": args.trace, "profile": args.profile, "start": start}
    options["node0_ahead"] = args.node0_ahead
    if args.node0_ahead:
        print(
            f"{n:>5} {start}: node 0 starts {args.node0_ahead:g} s before the others, timed "
            "from the others' start",
            flush=True,
        )
    medians: dict[str, float] = {}
    runs_of: dict[str, list[dict[str, Any]]] = {}
    backends = [b for b in args.backends if b != "rdzv-fd" or start == "warm"]
    for backend in backends:
        why = too_big(backend, start, n, node_mib)
        if why is None:
            runs_of[backend] = []
        else:
            print(f"{n:>5} {backend} {start}: not run ({why})", flush=True)
    rounds = 0
    while rounds < args.repeat or _wants_fast(runs_of.get("torch"), rounds, args):
        rounds += 1  # interleaved, so load drift hits every backend alike
        for backend, runs in runs_of.items():
            runs.append(run_trial(backend, n, args.port, args.timeout, options))
    for backend, runs in runs_of.items():
        good = _print_runs(f"N={n} {start}", backend, runs)
        if not good:
            continue
        key = f"{backend} {start}"
        node_mib[key] = max([node_mib.get(key, 0.0)] + [r["node_uss_mib"] for r in good])
        medians[backend] = _print_row(n, key, good)
        if backend == "torch":
            for mode in ("fast", "slow"):
                these = [r for r in good if torch_mode(r) == mode]
                label = f"torch {mode} {len(these)}/{len(good)}"
                if these:
                    medians[f"torch {mode}"] = _print_row(n, label, these)
                else:
                    print(
                        _row(
                            [str(n), label, "-", f"mode not observed in {len(good)} runs"]
                            + ["-"] * 7
                        ),
                        flush=True,
                    )
        for r in good:
            if "trace" in r:
                print(f"      trace {backend} N={n}: {r['trace']}", flush=True)
        if args.trace:
            print_split(n, backend, good)
    print(f"{n:>5} {start} ({_memory.load_text()})", flush=True)
    for variant in ("rdzv", "rdzv-fd"):
        if variant not in medians:
            continue
        for against in ("torch fast", "torch", "torch slow"):
            if against not in medians:
                if against == "torch fast" and "torch" in medians:
                    trials = len([r for r in runs_of["torch"] if "seconds" in r])
                    print(
                        f"{n:>5} {start} ratio {variant}/torch-fast: none, torch's fast mode "
                        f"was not observed in {trials} runs (headline goal not shown)",
                        flush=True,
                    )
                continue
            ratio = medians[variant] / medians[against]
            goal = ""
            if against == "torch fast" and n in _FAST_GOAL_AT.get(start, ()):
                met = "met" if ratio <= 1.0 else "MISSED"
                goal = f" (headline; issue 25 goal <= 1.0: {met})"
            elif against == "torch" and n in _RATIO_GOAL_AT.get(start, ()):
                met = "met" if ratio <= _RATIO_GOAL else "MISSED"
                goal = f" (median of both modes; issue 12/17 goal <= {_RATIO_GOAL}: {met})"
            name = against.replace(" ", "-")
            print(f"{n:>5} {start} ratio {variant}/{name} = {ratio:.3f}{goal}", flush=True)
            if against == "torch fast":
                print_paired(n, start, variant, runs_of[variant], runs_of["torch"])
    if n in _SECONDS_GOAL and "rdzv" in medians and start == "warm":
        goal = "met" if medians["rdzv"] < _SECONDS_GOAL[n] else "MISSED"
        print(f"{n:>5} rdzv {medians['rdzv']:.3f} s (goal < {_SECONDS_GOAL[n]:g} s: {goal})")


def print_paired(
    n: int, start: str, variant: str, runs: list[dict[str, Any]], torch: list[dict[str, Any]]
) -> None:
    """How reliably ``variant`` is at most torch's fast mode: its trial against torch's of
    the same round (interleaved, so they shared the machine's load), over the rounds where
    both ran and torch fell on its fast mode: in how many it was not slower, and the median
    of the per-round ratios."""
    pairs = [
        (mine["seconds"], theirs["seconds"])
        for mine, theirs in zip(runs, torch, strict=False)
        if "seconds" in mine and "seconds" in theirs and torch_mode(theirs) == "fast"
    ]
    if not pairs:
        return
    ratios = [mine / theirs for mine, theirs in pairs]
    at_most = sum(ratio <= 1.0 for ratio in ratios)
    print(
        f"{n:>5} {start} rounds {variant} <= torch-fast: {at_most}/{len(pairs)} (paired by "
        f"round; per-round ratios median {statistics.median(ratios):.3f}, "
        f"{min(ratios):.3f}-{max(ratios):.3f})",
        flush=True,
    )


def packed_rows(n: int, args: argparse.Namespace) -> None:
    """Packed trials at ``n`` (threads in ``args.procs`` processes); one row per backend."""
    options = {"trace": False, "profile": None, "procs": args.procs}
    backends = [b for b in args.backends if b != "rdzv-fd"]  # no pre-bound socket here
    runs_of: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    for _ in range(args.repeat):
        for backend in backends:
            runs_of[backend].append(run_trial(backend, n, args.port, args.timeout, options))
    medians: dict[str, float] = {}
    for backend, runs in runs_of.items():
        good = _print_runs(f"packed N={n}", backend, runs)
        if not good:
            print(f"{n:>5} packed {backend}: no successful trial", flush=True)
            continue
        medians[backend] = statistics.median(r["seconds"] for r in good)
        peak = max(r["peak_pss_mib"] for r in good)
        times = ", ".join(f"{r['seconds']:.3f}" for r in good)
        print(
            f"{n:>5} packed {backend:6s} {good[0]['procs']} procs x {-(-n // good[0]['procs'])} "
            f"threads: median {medians[backend]:.3f} s, runs "
            f"{times}; total PSS max {peak:.0f} MiB "
            f"(after the last return {max(r['pss_mib'] for r in good):.0f}, before the release "
            f"{max(r['pss_before_mib'] for r in good):.0f}); thread CPU ms median "
            f"{statistics.median(r['median_thread_cpu_ms'] for r in good):.2f}"
            + ("" if all(r["all_correct"] for r in good) else "  WRONG RANKS"),
            flush=True,
        )
        if backend == "rdzv" and n in _PACKED_GOAL:
            seconds, mib = _PACKED_GOAL[n]
            met = medians[backend] < seconds and peak < mib
            print(
                f"{n:>5} packed rdzv goal < {seconds:g} s and < {mib / 1024:g} GiB: "
                + ("met" if met else "MISSED"),
                flush=True,
            )
    print(f"{n:>5} packed ({_memory.load_text()})", flush=True)
    if "rdzv" in medians and "torch" in medians:
        print(f"{n:>5} packed ratio rdzv/torch = {medians['rdzv'] / medians['torch']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="*", default=[8, 64, 256, 1024])
    parser.add_argument("--packed", type=int, nargs="*", default=[4096], help="N, as threads")
    parser.add_argument("--procs", type=int, default=8, help="processes of a packed trial")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", nargs="+", default=["rdzv", "torch", "rdzv-fd"])
    parser.add_argument(
        "--start",
        nargs="+",
        choices=_processes.START,
        default=list(_processes.START),
        help="ways of starting the node processes (one row each)",
    )
    parser.add_argument(
        "--torch-fast",
        type=int,
        default=3,
        metavar="K",
        help="after --repeat rounds, more rounds (every backend) until torch fell on its fast "
        "mode K times, the headline's reference",
    )
    parser.add_argument(
        "--torch-fast-rounds", type=int, default=15, help="... but at most this many rounds"
    )
    parser.add_argument(
        "--node0-ahead",
        type=float,
        default=0.0,
        metavar="S",
        help="node 0 starts S seconds before the others (timed from the others' start): "
        "torch's fast mode by construction when S covers its bind; not the headline",
    )
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
        if options.get("procs"):
            preload, procs = _processes.PRELOAD[backend], options["procs"]
            result = _packed.trial(
                backend, n, procs, port, args.timeout, preload, _processes.make_handler
            )
        else:
            result = _processes.trial(backend, n, port, args.timeout, options)
        print(json.dumps(result), flush=True)
        return
    unknown = sorted(set(args.backends) - set(_processes.PRELOAD))
    if unknown:
        parser.error(f"unknown backends {unknown}; choose from {sorted(_processes.PRELOAD)}")
    if args.profile:
        args.profile = os.path.abspath(args.profile)
        os.makedirs(args.profile, exist_ok=True)
    header = ["N", "backend", "median s", "runs (s)", "node0 MiB", "node MiB"]
    header += ["node0 CPU ms", "node CPU ms", "idle %", "PSS MiB", "refused"]
    compileall.compile_dir(os.path.join(ROOT, "rdzv"), quiet=1)  # as pip install does
    print(f"start: {_memory.load_text()}; other engineers share this machine", flush=True)
    print(_row(header), flush=True)
    node_mib: dict[str, float] = {}  # private MiB per node process, largest seen per row
    for n in args.nodes:
        for start in args.start:
            process_rows(n, start, args, node_mib)
    for n in args.packed:
        packed_rows(n, args)


if __name__ == "__main__":
    main()
