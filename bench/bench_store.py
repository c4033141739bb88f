"""Store throughput: rdzv vs torch's TCPStore, side by side in one run.

Each server runs in its own process (started here, ended here by PID); the client runs in
this process. Measured per (client, server) pair:

* ``setget``: sequential ``set`` + ``get`` pairs on distinct keys with 16-byte values;
* ``batched``: ``multi_set`` then ``multi_get`` of 64 keys, counted in keys per second.

Prints one line per measurement and the ratios the store issue sets goals for:
rdzv/rdzv vs torch/torch (goal ≥ 1.5x set+get, ≥ 2x batched) and torch client on the rdzv
server vs torch on its own (goal ≥ 0.9x). Torch rows are skipped when torch is absent.

Usage: ``python bench/bench_store.py [--pairs 20000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

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


@contextmanager
def server(code: str) -> Iterator[int]:
    """Start a server process running ``code``; yield its port; end it by PID."""
    proc = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", code], stdout=subprocess.PIPE, text=True, cwd=_repo()
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on"):
            raise RuntimeError(f"server did not start: {line!r}")
        yield int(line.rsplit(":", 1)[1])
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
    with server(code) as port:
        store = client(port)
        try:
            return {"setget": setget(store, pairs, tag), "batched": batched(store, pairs, tag)}
        finally:
            del store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    try:
        import torch  # noqa: F401

        have_torch = True
    except ImportError:
        have_torch = False
        print("torch not installed: torch rows skipped")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
