"""Instructions per request of rdzv's store server, counted by valgrind (callgrind).

Wall-clock and even CPU-time figures swing on a shared machine; the count of user-space
instructions a process executes per request does not (it excludes the kernel's share: the
sends and receives, which cost both servers the same). The server runs in this process
under ``valgrind --tool=callgrind``; one client process (not counted) sends ``--ops`` then
``--ops * 6`` operations; the difference divided by the difference in operations is the
server's cost per operation, start-up and shut-down excluded.

Shapes (``--shape``):

* ``raw``: SET + GET of a 16-byte value in one write, the aggregate row's minimal client;
* ``torch``: torch's client, ``set`` then ``get`` (SET, WAIT, GET: three requests);
* ``rdzv``: rdzv's client, ``set`` then ``get`` (SET, then WAIT + GET in one write);
* ``batched``: rdzv's client, ``multi_set`` then ``multi_get`` of 64 keys (per round).

Usage: ``python bench/store_instructions.py [--shape raw] [--ops 200]`` (needs valgrind;
``torch`` needs torch).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

VALUE = b"0123456789abcdef"


def serve(ops: int, shape: str) -> None:
    """Run a server here and one client process doing ``ops`` operations against it."""
    from rdzv.store.server import StoreServer

    with StoreServer("127.0.0.1", 0) as srv:
        subprocess.run(
            [sys.executable, __file__, "--client", str(srv.port), "--ops", str(ops), shape],
            check=True,
        )


def client(port: int, ops: int, shape: str) -> None:
    """One client doing ``ops`` operations of ``shape`` (run in its own process)."""
    if shape == "raw":
        import socket

        from rdzv.store.wire import _wire

        reply = _wire.encode_bytes(VALUE)
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(_wire.encode_request(_wire.Validate()))
            for i in range(ops):
                key = f"k{i % 64}".encode()
                sock.sendall(
                    _wire.encode_request(_wire.Set(key, VALUE))
                    + _wire.encode_request(_wire.Get(key))
                )
                got = b""
                while len(got) < len(reply):
                    got += sock.recv(64)
        return
    store: object
    if shape == "torch":
        from datetime import timedelta

        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=600), False)
    else:
        from rdzv.store.client import TCPStore

        store = TCPStore("127.0.0.1", port, timeout=600)
    if shape == "batched":
        keys = [f"b{i}" for i in range(64)]
        for _ in range(ops):
            store.multi_set(keys, [VALUE] * 64)  # type: ignore[attr-defined]
            store.multi_get(keys)  # type: ignore[attr-defined]
    else:
        for i in range(ops):
            store.set(f"k{i % 64}", VALUE)  # type: ignore[attr-defined]
            store.get(f"k{i % 64}")  # type: ignore[attr-defined]


def count(ops: int, shape: str) -> int:
    """User-space instructions of a server process serving ``ops`` operations."""
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--serve",
            "--ops",
            str(ops),
            shape,
        ],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output: {done.stderr[-400:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    shapes = ["raw", "torch", "rdzv", "batched"]
    parser.add_argument("shape", nargs="?", default="raw", choices=shapes)
    parser.add_argument("--ops", type=int, default=200, help="operations of the short run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.ops, args.shape)
        return 0
    if args.client is not None:
        client(args.client, args.ops, args.shape)
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing measured")
        return 1
    short, long = args.ops, args.ops * 6
    per_op = (count(long, args.shape) - count(short, args.shape)) / (long - short)
    print(f"rdzv server, {args.shape}: {per_op:,.0f} user-space instructions per operation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
