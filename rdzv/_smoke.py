"""The store smoke run behind ``python -m rdzv smoke`` (importable, so spawned children
can find their entry point)."""

from __future__ import annotations

import multiprocessing as mp
import queue
import time

from rdzv.errors import StoreError
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer

__all__ = ["smoke"]


def _smoke_client(port: int, rank: int, clients: int, result: mp.Queue[str]) -> None:
    try:
        with TCPStore("127.0.0.1", port, timeout=30, seed=rank) as store:
            store.set(f"rank/{rank}", str(rank))
            store.add("arrived", 1)
            store.wait([f"rank/{r}" for r in range(clients)])
            seen = store.multi_get([f"rank/{r}" for r in range(clients)])
            assert seen == [str(r).encode() for r in range(clients)], seen
            result.put(f"ok {rank}")
    except (StoreError, AssertionError) as exc:
        result.put(f"fail {rank}: {exc}")


def smoke(clients: int) -> int:
    """Run the smoke check with ``clients`` processes; print a verdict; 0 when all passed."""
    start = time.monotonic()
    ctx = mp.get_context("spawn")
    with StoreServer("127.0.0.1", 0) as server:
        results: mp.Queue[str] = ctx.Queue()
        procs = [
            ctx.Process(target=_smoke_client, args=(server.port, r, clients, results))
            for r in range(clients)
        ]
        for proc in procs:
            proc.start()
        try:
            lines = []
            for _ in procs:
                try:
                    lines.append(results.get(timeout=60))
                except queue.Empty:
                    lines.append("fail: a client reported nothing within 60 s")
                    break
        finally:
            for proc in procs:
                proc.join(timeout=10)
                if proc.is_alive():
                    proc.kill()
                    proc.join()
        arrived = server.kv.data.get(b"/arrived", b"0").decode()
    failures = [line for line in lines if not line.startswith("ok")]
    elapsed = time.monotonic() - start
    verdict = "FAILED" if failures else "OK"
    print(f"store smoke {verdict}: {clients} clients, {arrived} arrived, {elapsed:.2f}s")
    for line in failures:
        print(f"  {line}")
    return 1 if failures else 0
