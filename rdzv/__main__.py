"""``python -m rdzv``: run a standalone store server, or a quick store smoke run.

* ``python -m rdzv serve [--host H] [--port P]`` serves until SIGINT/SIGTERM and prints one
  line ``listening on HOST:PORT`` (flushed) once it accepts connections. It listens on
  loopback (``127.0.0.1``) unless ``--host`` says otherwise. A port that cannot be bound is
  one line on stderr (``rdzv serve: cannot listen on HOST:PORT: [Errno N] ...``), exit 1.
* ``python -m rdzv smoke [--clients N]`` starts a server on loopback, runs N client processes
  that each set, add, wait on and read each other's keys, and prints a one-line verdict.
* ``python -m rdzv --version`` prints the installed version.

Exit codes: 0 success, 1 the server could not listen or the smoke run failed, 2 bad
arguments (argparse).
"""

from __future__ import annotations

import argparse
import errno as errno_mod
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Final

from rdzv.errors import StoreBindError
from rdzv.store.server import StoreServer

__all__ = ["main"]

PROG: Final = "python -m rdzv"
DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 29400

_DESCRIPTION: Final = """\
rdzv's TCPStore server on its own (torch's wire protocol, torch 2.13).
"python -m rdzv COMMAND --help" describes each command.
"""
_EPILOG: Final = """\
exit status: 0 success, 1 the server could not listen or the smoke run failed,
2 bad arguments. Details: docs/store.md.
"""
_SERVE_DESCRIPTION: Final = """\
Run a store server until Ctrl-C or SIGTERM. It prints one line, "listening on
HOST:PORT", once it accepts connections (with --port 0, PORT is the port the
system picked).

--host decides the listen addresses: a loopback name or address listens on
loopback only; "" or "*" or "::" on every interface (IPv6 and IPv4); 0.0.0.0 on
every IPv4 interface; another address binds that address.
"""
_SMOKE_DESCRIPTION: Final = """\
Start a store server on loopback and N client processes that each set, add, wait
on and read each other's keys; print a one-line verdict.
"""
_HINTS: Final = {
    errno_mod.EADDRINUSE: "pick another --port, or stop the process holding this one",
    errno_mod.EACCES: "ports below 1024 need privileges; pick another --port",
    errno_mod.EADDRNOTAVAIL: "--host is not an address of this machine",
}


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written (plain text for a terminal), defaults shown per option."""


def version() -> str:
    """The installed version of the distribution that provides ``rdzv``.

    Returns:
        The version string, or ``"unknown (not installed)"`` when ``rdzv`` runs from a
        source tree that was never installed.
    """
    names = metadata.packages_distributions().get("rdzv", [])
    for name in [*names, "rdzv", "rdzv-harness"]:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown (not installed)"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is outside 0..65535")
    return port


def _positive(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {count}")
    return count


def _shown(host: str, port: int) -> str:
    host = host or "*"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bind_failure(exc: StoreBindError, host: str, port: int) -> str:
    cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
    line = f"rdzv serve: cannot listen on {_shown(host, port)}: {cause}"
    hint = _HINTS.get(exc.errno or 0)
    return f"{line}; {hint}" if hint else line


def _serve(host: str, port: int) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = StoreServer(host, port)
    try:
        server.start()
    except StoreBindError as exc:
        print(_bind_failure(exc, host, port), file=sys.stderr, flush=True)
        return 1
    with server:
        print(f"listening on {_shown(host, server.port)}", flush=True)
        stop.wait()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=_DESCRIPTION, epilog=_EPILOG, formatter_class=_Formatter
    )
    parser.add_argument("--version", action="version", version=f"rdzv {version()}")
    sub = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser(
        "serve",
        help="run a standalone store server until Ctrl-C or SIGTERM",
        description=_SERVE_DESCRIPTION,
        formatter_class=_Formatter,
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help="endpoint host to listen on")
    serve.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help="port to listen on; 0 picks a free port"
    )
    smoke = sub.add_parser(
        "smoke",
        help="start a server and N clients on loopback, print a verdict",
        description=_SMOKE_DESCRIPTION,
        formatter_class=_Formatter,
    )
    smoke.add_argument(
        "--clients", type=_positive, default=8, metavar="N", help="client processes to run"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rdzv``; returns the exit status (see the module doc).

    Raises:
        SystemExit: for ``--help``/``--version`` (status 0) and bad arguments (status 2).
    """
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args.host, args.port)
    from rdzv._smoke import smoke  # multiprocessing is only needed here

    return smoke(args.clients)


if __name__ == "__main__":
    sys.exit(main())
