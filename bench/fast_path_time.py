"""The store server's fast path alone, timed in this process: µs per set+get pair.

The aggregate row's pair (a SET and a GET of the key just set, 16-byte values, one read),
served by :func:`rdzv.store.state._fast.fast_path` alone (no socket, no loop, no connection)
on a table of the aggregate's 16,384 keys, then of 64 (a table that stays in the cache), the
pairs in a shuffled order (the aggregate's 256 clients interleave in no fixed order): the
difference is what the table's cache misses cost per pair when nothing else runs.
``--compiled`` times the same with the fast path compiled by mypyc, in a temporary copy of
the package (``bench/_compiled.py``), in a process of its own after this one's figures.

Usage: ``python bench/fast_path_time.py [--pairs 200000] [--compiled]``
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import _compiled
from _store_load import _KEYS, _pair

from rdzv.store.state import _fast
from rdzv.store.state._writers import WatchingKV
from rdzv.store.wire._wire import Limits


def per_pair(keys: int, pairs: int) -> float:
    """µs per pair served on a table of ``keys`` keys (each key set once before timing)."""
    serve = _fast.fast_path(WatchingKV(), Limits(), time.monotonic)
    reads = [_pair(f"agg/{i // _KEYS}/{i % _KEYS}".encode()) for i in range(keys)]
    for read in reads:
        serve(1, read)
    order = random.Random(0)  # the clients' pairs interleave in no fixed order
    cycled = []
    while len(cycled) < pairs:
        order.shuffle(reads)
        cycled += reads[: pairs - len(cycled)]
    start = time.perf_counter()
    for read in cycled:
        serve(1, read)
    return 1e6 * (time.perf_counter() - start) / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--compiled", action="store_true", help="also the mypyc-compiled path")
    args = parser.parse_args()
    kind = "compiled" if _fast.__file__.endswith(".so") else "interpreted"
    for keys in (256 * _KEYS, _KEYS):
        took = per_pair(keys, args.pairs)
        print(f"fast path ({kind}), table of {keys} keys: {took:.2f} us per pair")
    if args.compiled:
        with _compiled.compiled_tree(str(Path(__file__).resolve().parent.parent)) as tree:
            if tree is not None:
                path = os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))
                env = dict(os.environ, PYTHONPATH=path)
                command = [sys.executable, __file__, "--pairs", str(args.pairs)]
                subprocess.run(command, env=env, check=True)


if __name__ == "__main__":
    main()
