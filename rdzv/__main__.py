"""``python -m rdzv``: run a standalone store server, or a quick store smoke run.

* ``python -m rdzv serve [--host H] [--port P]`` serves until SIGINT/SIGTERM and prints one
  line ``listening on HOST:PORT`` (flushed) once it accepts connections.
* ``python -m rdzv smoke [--clients N]`` starts a server on loopback, runs N client processes
  that each set, add, wait on and read each other's keys, and prints a one-line verdict.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from rdzv._smoke import smoke as run_smoke
from rdzv.server import StoreServer


def _serve(host: str, port: int) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with StoreServer(host, port) as server:
        print(f"listening on {host or '*'}:{server.port}", flush=True)
        stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rdzv``."""
    parser = argparse.ArgumentParser(prog="python -m rdzv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a standalone store server")
    serve.add_argument("--host", default="", help="endpoint host (default: all interfaces)")
    serve.add_argument("--port", type=int, default=29400, help="port (0: ephemeral)")
    smoke_cmd = sub.add_parser("smoke", help="start a server and N client processes on loopback")
    smoke_cmd.add_argument("--clients", type=int, default=8)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args.host, args.port)
    if args.clients < 1:
        parser.error(f"--clients must be at least 1, got {args.clients}")
    return run_smoke(args.clients)


if __name__ == "__main__":
    sys.exit(main())
