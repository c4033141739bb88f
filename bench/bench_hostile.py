"""Store server memory under hostile connections, beside a legitimate client.

Starts ``python -m rdzv serve`` on loopback (its own process, ended here by PID), then opens
``--connections`` (10,000) hostile connections, ``--open`` (1,000) at a time, of three kinds
in turn: a partial frame (a VALIDATE, then the first 60 KiB of a SET announcing an 8 MiB
value, then nothing), garbage (4 KiB of random bytes) and a slow sender (a VALIDATE, then
a SET's bytes a few at a time). A legitimate client does a set and a get between batches.
Prints the server's RSS before, at the peak of the attack (``VmHWM``), and a moment after
every hostile connection closed (2 s), and the legitimate client's worst round trip.

Usage: ``python bench/bench_hostile.py [--connections 10000] [--open 1000]``
"""

from __future__ import annotations

import argparse
import contextlib
import random
import socket
import struct
import subprocess
import sys
import time

import _memory

from rdzv.store.client import TCPStore
from rdzv.store.wire import _wire

SERVER = (
    "import sys; from rdzv.__main__ import main; sys.exit(main(['serve', '--host', "
    "'127.0.0.1', '--port', '0']))"
)
VALIDATE = _wire.encode_request(_wire.Validate())
SET_HEAD = bytes([_wire.Op.SET]) + _wire.encode_bytes(b"/k") + struct.pack("<Q", 8 * 2**20)


def _rss_mib(pid: int) -> float:
    return _memory.rollup_kib(pid).get("Rss", 0) / _memory.MIB


def _open(port: int, kind: int, rng: random.Random) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setblocking(False)
    with contextlib.suppress(OSError):
        if kind == 0:  # a partial frame
            sock.send(VALIDATE + SET_HEAD + b"x" * (60 * 1024))
        elif kind == 1:  # garbage
            sock.send(rng.randbytes(4096))
        else:  # a slow sender: its first bytes now, more at each batch
            sock.send(VALIDATE + SET_HEAD[:3])
    return sock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--open", type=int, default=1_000)
    args = parser.parse_args(argv)
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        rng = random.Random(20261204)
        with TCPStore("127.0.0.1", port, timeout=30.0) as legit:
            legit.set("keep", "kept")
            before = _rss_mib(proc.pid)
            worst = 0.0
            opened = 0
            while opened < args.connections:
                batch = [_open(port, (opened + i) % 3, rng) for i in range(args.open)]
                opened += len(batch)
                for sock in batch[2::3]:  # the slow senders send a little more
                    with contextlib.suppress(OSError):
                        sock.send(b"\x00")
                start = time.perf_counter()
                legit.set(f"k{opened}", "v")
                assert legit.get("keep") == b"kept"
                worst = max(worst, time.perf_counter() - start)
                for sock in batch:
                    sock.close()
            peak = _memory.peak_rss_kib(proc.pid) / _memory.MIB
            assert legit.get("keep") == b"kept"  # every close above was read by now
            time.sleep(2.0)  # the server hands freed memory back 1 s after the attack
            after = _rss_mib(proc.pid)
        print(
            f"hostile: {opened} connections ({args.open} open at once): server RSS "
            f"{before:.1f} MiB before, peak {peak:.1f}, {after:.1f} after; legitimate "
            f"set+get worst {worst * 1000:.1f} ms; {_memory.load_text()}",
            flush=True,
        )
    finally:
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
