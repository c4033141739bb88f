"""Store throughput: rdzv vs torch's TCPStore, side by side in one run.

Each server runs in its own process (started here, ended here by PID). Rows (``--rows``):

* ``pairs``: one client in this process, per (client, server) pair: ``setget``, sequential
  ``set`` + ``get`` pairs on distinct keys with 16-byte values; ``batched``, ``multi_set``
  then ``multi_get`` of 64 keys, counted in keys per second. Ratios: rdzv/rdzv vs
  torch/torch (goal >= 1.5x set+get, >= 2x batched) and torch client on the rdzv server vs
  torch on its own (goal >= 0.9x).
* ``aggregate``: ``--clients`` (256) client processes at once against each server, set+get
  pairs for ``--seconds``; aggregate pairs/s and the ratio (goal >= 1.0x torch's server),
  and the server process's CPU time per pair (user and system, from ``/proc``), the figure
  that stays put when other work shares the machine. ``--floor`` adds two floors of the
  interpreter on the same clients (``FLOOR_SERVERS``): a minimal Python epoll server, and the
  same loop serving each read with rdzv's fast path; the ratios to them say how much of the
  remainder is the interpreter and how much rdzv's own work.
* ``storm``: ``--storm`` (4096) clients connecting within ``--storm-window`` (0.1 s) to
  each server, each served one set+get: how many were served, retried, p50/p99/max
  connect-to-reply latency, server RSS with every connection open (goal <= 200 MiB).

Both load rows use one minimal raw-socket client against either server (so they measure
the server); see ``bench/_store_load.py``. The whole run happens in its own network
namespace (``unshare -n``, loopback up; ``--no-netns`` to run here): torch's server looks up
every peer's name on accept, which outside one stalls 5 s per client on this machine's
unreachable resolver. Torch rows are skipped, saying so, when torch is absent.

``--compiled`` adds, to the aggregate row, rdzv's server with its fast path compiled by
mypyc (``rdzv+mypyc``; with ``--floor`` also ``floor+fast+mypyc``), compiled in a temporary
copy of the package that the run removes (``bench/_compiled.py``): what a compiled fast
path gives, measured.

The aggregate row also prints each server's share of a CPU while it was runnable and how
often it was preempted per pair (``bench/_sched.py``): pairs/s is that share divided by the
CPU per pair. ``--syscalls`` counts the server's system calls per pair with ``perf stat``;
``--baseline CHECKOUT`` adds rdzv's server imported from another checkout (``rdzv@base``),
interleaved with this one's, for an A/B (or, on the same code, an A/A: the noise) in one run.

Usage: ``python bench/bench_store.py [--pairs 20000] [--repeat 3] [--rows pairs aggregate storm]
[--floor] [--compiled] [--syscalls] [--baseline CHECKOUT]``
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from typing import Any

import _compiled
import _memory
import _sched
import _store_load

RDZV_SERVER = (
    "import sys; from rdzv.__main__ import main; sys.exit(main(['serve', '--host', "
    "'127.0.0.1', '--port', '0']))"
)
TORCH_SERVER = (
    "import datetime, signal, sys, torch.distributed as d\n"
    "s = d.TCPStore('127.0.0.1', 0, None, True, datetime.timedelta(seconds=60), False)\n"
    "print(f'listening on 127.0.0.1:{s.port}', flush=True)\n"
    "signal.sigwait({signal.SIGTERM, signal.SIGINT})\n"
)
#: The interpreter's ceiling on the aggregate workload, measured: the least a Python server
#: does per set+get pair, on the loop primitives of rdzv's server (``rdzv/store/server/_loop.py``).
#: ``floor``: one epoll wait, one recv, one send of the known reply (no parsing, no store);
#: ``floor+fast``: the same loop serving each read with rdzv's own fast path
#: (``rdzv/store/state/_fast.py``: parse, table, reply), without rdzv's connection bookkeeping.
#: rdzv's server minus ``floor+fast`` is its bookkeeping; ``floor+fast`` minus ``floor`` its
#: parsing and table work. Both rely on what the aggregate clients do (one VALIDATE first,
#: then a pair in one write and the next only after the reply): floors, not servers.
_FLOOR = """
import select, socket, sys, time
sys.path.insert(0, 'bench')
from _store_load import _HELLO, _REPLY
from rdzv.store.state._fast import fast_path
from rdzv.store.wire._wire import Limits
from rdzv.store.state._writers import WatchingKV
serve = fast_path(WatchingKV(), Limits(), time.monotonic)
srv = socket.create_server(('127.0.0.1', 0), backlog=4096)
srv.setblocking(False)
ep = select.epoll()
ep.register(srv.fileno(), select.EPOLLIN)
conns, hello = {}, {}
print(f'listening on 127.0.0.1:{srv.getsockname()[1]}', flush=True)
while True:
    for fd, _ in ep.poll():
        if fd == srv.fileno():
            while True:
                try:
                    c, _ = srv.accept()
                except BlockingIOError:
                    break
                c.setblocking(False)
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                ep.register(c.fileno(), select.EPOLLIN)
                conns[c.fileno()], hello[c.fileno()] = c, len(_HELLO)
            continue
        c = conns[fd]
        try:
            data = c.recv(65536)
        except BlockingIOError:
            continue
        if not data:
            ep.unregister(fd)
            c.close()
            del conns[fd]
            continue
        if hello[fd]:  # the handshake: no reply
            skip = min(hello[fd], len(data))
            hello[fd] -= skip
            if skip == len(data):
                continue
            data = data[skip:]
        SERVE_ONE_READ
"""
FLOOR_SERVERS = {
    "floor": _FLOOR.replace("SERVE_ONE_READ", "c.send(_REPLY)"),
    "floor+fast": _FLOOR.replace("SERVE_ONE_READ", "c.send(serve(fd, data)[1])"),
}


@contextmanager
def server(code: str) -> Iterator[tuple[int, int]]:
    """Start a server process running ``code``; yield its port and PID; end it by PID."""
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", code], stdout=subprocess.PIPE, text=True, cwd=_repo()
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"server did not start: {line!r}")
        yield int(line.rsplit(":", 1)[1]), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _repo() -> str:
    from pathlib import Path

    return str(Path(__file__).resolve().parent.parent)


def rdzv_client(port: int) -> Any:
    from rdzv.store.client import TCPStore

    return TCPStore("127.0.0.1", port, timeout=60)


def torch_client(port: int) -> Any:
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=60), False)


def setget(store: Any, pairs: int, tag: str) -> float:
    value = b"0123456789abcdef"
    for i in range(500):
        store.set(f"w{tag}{i}", value)
        store.get(f"w{tag}{i}")
    start = time.perf_counter()
    for i in range(pairs):
        key = f"{tag}{i}"
        store.set(key, value)
        store.get(key)
    return pairs / (time.perf_counter() - start)


def batched(store: Any, pairs: int, tag: str) -> float:
    keys = [f"b{tag}{i}" for i in range(64)]
    values = [b"0123456789abcdef"] * 64
    rounds = max(10, pairs // 64)
    start = time.perf_counter()
    for _ in range(rounds):
        store.multi_set(keys, values)
        store.multi_get(keys)
    return rounds * 64 / (time.perf_counter() - start)


def measure_once(client: Callable[[int], Any], code: str, pairs: int, tag: str) -> dict[str, float]:
    with server(code) as (port, _):
        store = client(port)
        try:
            return {"setget": setget(store, pairs, tag), "batched": batched(store, pairs, tag)}
        finally:
            del store


def pair_rows(args: argparse.Namespace, have_torch: bool) -> None:
    """One client in this process against each server: set+get, batched; ratios."""
    combos = [("rdzv client -> rdzv server", rdzv_client, RDZV_SERVER)]
    if have_torch:
        combos += [
            ("torch client -> torch server", torch_client, TORCH_SERVER),
            ("torch client -> rdzv server", torch_client, RDZV_SERVER),
            ("rdzv client -> torch server", rdzv_client, TORCH_SERVER),
        ]
    # Interleave the combinations, repeat by repeat: this VM's wake-up latency drifts with
    # background load, so consecutive blocks of one combination would compare different
    # machines. Medians over the repeats are reported.
    samples: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in combos}
    for r in range(args.repeat):
        for i, (name, client, code) in enumerate(combos):
            samples[name].append(measure_once(client, code, args.pairs, f"r{r}c{i}"))
    table = {
        name: {k: statistics.median(s[k] for s in runs) for k in ("setget", "batched")}
        for name, runs in samples.items()
    }
    for name, row in table.items():
        print(
            f"{name:30s} set+get {row['setget']:9.0f} pairs/s   "
            f"batched {row['batched']:10.0f} keys/s",
            flush=True,
        )
    if have_torch:
        ours, theirs = table["rdzv client -> rdzv server"], table["torch client -> torch server"]
        mixed = table["torch client -> rdzv server"]
        print(f"ratio set+get  rdzv/torch              {ours['setget'] / theirs['setget']:.2f}x")
        print(f"ratio batched  rdzv/torch              {ours['batched'] / theirs['batched']:.2f}x")
        print(f"ratio torch client on rdzv/torch server {mixed['setget'] / theirs['setget']:.2f}x")


def _servers(
    have_torch: bool,
    floor: bool = False,
    compiled: str | None = None,
    baseline: str | None = None,
) -> list[tuple[str, str]]:
    servers = [("rdzv", RDZV_SERVER)]
    if have_torch:
        servers.append(("torch", TORCH_SERVER))
    else:
        print("torch server: not run (torch is not installed)")
    if floor:
        servers += FLOOR_SERVERS.items()
    if baseline is not None:  # rdzv's server from another checkout, for an A/B in one run
        prelude = (
            f"import sys; sys.path.insert(0, {baseline!r})\n"
            "import rdzv\n"
            f"assert rdzv.__file__.startswith({baseline!r}), rdzv.__file__\n"
        )
        servers.append(("rdzv@base", prelude + RDZV_SERVER))
    if compiled is not None:  # the same servers with the fast path compiled (never shipped)
        servers.append(("rdzv+mypyc", _compiled.prelude(compiled) + RDZV_SERVER))
        if floor:
            fast = FLOOR_SERVERS["floor+fast"]
            servers.append(("floor+fast+mypyc", _compiled.prelude(compiled) + fast))
    return servers


def aggregate_rows(args: argparse.Namespace, have_torch: bool) -> None:
    """``--clients`` client processes at once against each server; aggregate pairs/s."""
    if not args.compiled:
        _aggregate_rows(args, have_torch, None)
        return
    with _compiled.compiled_tree(_repo()) as tree:
        _aggregate_rows(args, have_torch, tree)


def _aggregate_rows(args: argparse.Namespace, have_torch: bool, compiled: str | None) -> None:
    runs: dict[str, list[float]] = {}
    costs: dict[str, list[tuple[float, float]]] = {}
    scheds: dict[str, list[tuple[float, float]]] = {}
    calls: dict[str, list[dict[str, float]]] = {}
    servers = _servers(have_torch, args.floor, compiled, args.baseline)
    for round_ in range(args.repeat):
        # Each round starts one server later: in an A/A run in a fixed order (--baseline on
        # the same code) the server run first came out ahead in all 5 rounds, by 1-23 %.
        turn = round_ % len(servers)
        for name, code in servers[turn:] + servers[:turn]:
            with (
                server(code) as (port, pid),
                _sched.syscalls(pid) if args.syscalls else nullcontext({}) as counted,
            ):
                before, sched_before = _memory.cpu_seconds(pid), _sched.sched(pid)
                sent_before = _sched.segments()
                result = _store_load.aggregate(port, args.clients, args.seconds)
                after, used = _memory.cpu_seconds(pid), _sched.sched(pid) - sched_before
                sent = _sched.segments() - sent_before
            if "error" in result:
                print(f"aggregate {name} server ERROR {result['error']}", flush=True)
                continue
            if result["wrong"]:
                print(f"aggregate {name} server: {result['wrong']} WRONG replies", flush=True)
            runs.setdefault(name, []).append(result["pairs_per_s"])
            # The server's CPU per pair (the clients' connects and handshakes included, a
            # rounding error against the pairs): steadier than pairs/s on a shared machine.
            pairs = max(result["pairs_per_s"] * args.seconds, 1.0)
            user, system = (1e6 * (b - a) / pairs for a, b in zip(before, after, strict=True))
            costs.setdefault(name, []).append((user, system))
            scheds.setdefault(name, []).append((used.share, used.involuntary / pairs))
            if counted:
                counted["TCP segments"] = sent
                calls.setdefault(name, []).append({k: v / pairs for k, v in counted.items()})
    for name, rates in runs.items():
        shown = ", ".join(f"{r:.0f}" for r in rates)
        user = statistics.median(u for u, _ in costs[name])
        system = statistics.median(s for _, s in costs[name])
        share = statistics.median(s for s, _ in scheds[name])
        preempted = statistics.median(p for _, p in scheds[name])
        print(
            f"aggregate {args.clients} client processes -> {name:10s} server: median "
            f"{statistics.median(rates):9.0f} set+get pairs/s (runs {shown}); server CPU "
            f"per pair {user + system:.1f} us ({user:.1f} user, {system:.1f} system); on a "
            f"CPU {100 * share:.0f} % of the time it was runnable (runs "
            + ", ".join(f"{100 * s:.0f}" for s, _ in scheds[name])
            + f"), preempted {preempted:.2f} times per pair",
            flush=True,
        )
        if name in calls:
            per_pair = {
                k: statistics.median(c.get(k, 0.0) for c in calls[name])
                for k in (*_sched.SYSCALLS, "TCP segments")
            }
            print(
                f"aggregate {name} server: system calls (and TCP segments, both ways) per pair "
                + ", ".join(f"{k} {v:.3f}" for k, v in per_pair.items() if v),
                flush=True,
            )
    rate = {name: statistics.median(rates) for name, rates in runs.items()}
    cost = {name: statistics.median(u + s for u, s in pairs) for name, pairs in costs.items()}
    if "rdzv" in rate and "torch" in rate:
        ratio = rate["rdzv"] / rate["torch"]
        goal = "met" if ratio >= 1.0 else "MISSED"
        print(f"ratio aggregate rdzv/torch server {ratio:.2f}x (goal >= 1.0x: {goal})")
        print(f"ratio server CPU per pair rdzv/torch {cost['rdzv'] / cost['torch']:.2f}x")
    if "rdzv@base" in rate:
        print(
            f"ratio aggregate rdzv/rdzv@base {rate['rdzv'] / rate['rdzv@base']:.2f}x, server "
            f"CPU per pair {cost['rdzv'] / cost['rdzv@base']:.2f}x (this checkout against "
            f"{args.baseline})"
        )
    if "rdzv+mypyc" in rate and "torch" in rate:
        ratio, per_pair = rate["rdzv+mypyc"] / rate["torch"], cost["rdzv+mypyc"] / cost["torch"]
        print(
            f"ratio aggregate rdzv+mypyc/torch server {ratio:.2f}x, server CPU per pair "
            f"{per_pair:.2f}x (the fast path compiled in a temporary copy; not shipped)"
        )
    if "floor" in rate:
        for name in ("rdzv", "torch", "floor+fast", "rdzv+mypyc", "floor+fast+mypyc"):
            if name in rate:
                print(
                    f"ratio aggregate {name}/floor {rate[name] / rate['floor']:.2f}x, server "
                    f"CPU per pair {name}/floor {cost[name] / cost['floor']:.2f}x",
                    flush=True,
                )


def storm_rows(args: argparse.Namespace, have_torch: bool) -> None:
    """``--storm`` clients connecting within ``--storm-window`` s to each server."""
    for _ in range(args.repeat):
        for name, code in _servers(have_torch):
            with server(code) as (port, pid):
                r = _store_load.storm(
                    port, pid, args.storm, args.storm_procs, args.storm_window, args.patience
                )
            lat = (
                "no client served"
                if r["p50_ms"] is None
                else f"connect-to-reply p50 {r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} "
                f"max {r['max_ms']:.1f} ms"
            )
            print(
                f"storm {name:5s} server: {r['served']}/{r['clients']} served "
                f"({r['correct']} correct), {r['retried']} retried after a refusal/reset, "
                f"{r['syn_retransmitted']} with a SYN retransmitted; {lat}; last client "
                f"started {r['max_start_late_ms']:.0f} ms late; server RSS "
                f"{r['server_rss_mib']:.1f} MiB with every connection open (before "
                f"{r['server_rss_before_mib']:.1f}, peak {r['server_peak_rss_mib']:.1f})"
                + (f"; errors {r['errors']}" if r["errors"] else ""),
                flush=True,
            )


_IN_NETNS = "RDZV_BENCH_STORE_NETNS"


def _in_netns() -> int:
    """Run this script again inside its own network namespace (``unshare -n``, loopback
    up): no DNS server is reachable there, so torch's server, which looks up every peer's
    name when it accepts a connection, fails those lookups at once instead of waiting out
    the resolver's 5 s timeout (outside, under a storm, it serves one client per 5 s
    stall). Falls back to running here, saying so, when ``unshare`` is not permitted."""
    me = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    env = dict(os.environ, **{_IN_NETNS: "1"})
    done = subprocess.run(
        ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {me}"], env=env, check=False
    )
    if done.returncode in (0, 1, 2):
        return done.returncode
    print("unshare -n failed: running in this network namespace (torch may stall on DNS)")
    os.environ[_IN_NETNS] = "1"
    return main()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--rows", nargs="+", default=["pairs", "aggregate", "storm"], help="which measurements"
    )
    parser.add_argument("--clients", type=int, default=256, help="aggregate: client processes")
    parser.add_argument("--seconds", type=float, default=3.0, help="aggregate: window (s)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="aggregate: also the interpreter's floor (a minimal Python epoll server)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="aggregate: also rdzv's server (and, with --floor, floor+fast) with the fast path "
        "compiled by mypyc in a temporary copy of the package (never shipped)",
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="aggregate: also rdzv's server imported from this checkout (rdzv@base), "
        "interleaved with this one's: an A/B in one run",
    )
    parser.add_argument(
        "--syscalls",
        action="store_true",
        help="aggregate: also count each server's system calls per pair (needs perf)",
    )
    parser.add_argument("--storm", type=int, default=4096, help="storm: clients")
    parser.add_argument("--storm-procs", type=int, default=16, help="storm: client processes")
    parser.add_argument("--storm-window", type=float, default=0.1, help="storm: spread (s)")
    parser.add_argument(
        "--patience", type=float, default=30.0, help="storm: a client gives up after (s)"
    )
    parser.add_argument(
        "--no-netns", action="store_true", help="run here, not in a DNS-free network namespace"
    )
    args = parser.parse_args()
    if not args.no_netns and os.environ.get(_IN_NETNS) != "1":
        return _in_netns()
    warnings.filterwarnings("ignore")
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
        print("torch not installed: torch rows skipped")
    for row, run in (("pairs", pair_rows), ("aggregate", aggregate_rows), ("storm", storm_rows)):
        if row in args.rows:
            print(f"{row}: start, {_memory.load_text()}", flush=True)
            run(args, have_torch)
            print(f"{row}: end, {_memory.load_text()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
