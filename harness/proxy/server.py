"""The embedded proxy as a standalone server: its arguments, and serving until told to stop.

``harness proxy`` (:mod:`harness.cli.proxy`) and ``python -m harness.proxy`` both run
:func:`run`. The second imports the proxy alone, not the whole command line (0.4 s of
imports, against ~0.15 s): a run of 10,240 nodes starts four proxy processes this way
(:mod:`harness.proxy.process`), on the same cores as everything else.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import secrets
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.errors import HarnessError, ProxyApiError
from harness.proxy.api import serve
from harness.proxy.collection import ProxyCollection
from harness.proxy.loop import new_event_loop

__all__ = ["DESCRIPTION", "add_arguments", "main", "port_number", "run"]

DESCRIPTION = """A TCP fault proxy speaking the Toxiproxy 2.x HTTP API (like
toxiproxy-server), with reproducible randomness (--seed) and an event log (GET /events)."""


def port_number(text: str) -> int:
    """argparse type of ``--port``: 0..65535 (0 picks a free port), else a usage error."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"a port is a whole number from 0 to 65535 (0 picks a free one), got {text!r}"
        )
    return port


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's options on ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=port_number, default=8474, help="API port (default 8474); 0 picks a free one"
    )
    parser.add_argument("--seed", type=int, help="seed for every random choice (default: random)")
    parser.add_argument(
        "--config", type=Path, help="JSON array of proxies to create at start (as /populate)"
    )
    parser.add_argument(
        "--until-stdin-closes",
        action="store_true",
        help="stop once standard input reaches its end (a parent that started it with a pipe"
        " ended, however it ended)",
    )


class _ConfigError(HarnessError):
    """The --config file cannot be used (exit status 2, like a usage error)."""


def _load_config(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _ConfigError(f"--config {path}: cannot read it: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise _ConfigError(f"--config {path}: not JSON: {exc}") from exc


async def _serve_proxy(args: argparse.Namespace, say: Callable[[str], None]) -> None:
    seed = secrets.randbits(32) if args.seed is None else args.seed
    hub = ProxyCollection(seed)
    if args.config is not None:
        config = _load_config(args.config)
        _, error = await hub.populate(config)
        if error is not None:
            await hub.close()
            raise _ConfigError(f"--config {args.config}: {error.detail}") from error
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    if args.until_stdin_closes:
        _stop_at_end_of_stdin(loop, stop)

    def ready(host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        say(f"harness proxy: API on http://{shown}:{port} seed {seed}")

    try:
        runner = await serve(args.host, args.port, hub, ready)
    except ProxyApiError:
        await hub.close()
        raise
    try:
        await stop.wait()
    finally:
        await hub.close()
        await runner.cleanup()


def _open_files_up_to_the_limit() -> None:
    """Raise this process's soft limit of open files to the hard one: each link holds three
    descriptors (its listener, the client's connection, the dial upstream)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _stop_at_end_of_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    fd = sys.stdin.fileno()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, readable)


def _print(line: str) -> None:
    with contextlib.suppress(BrokenPipeError):
        print(line, flush=True)


def run(args: argparse.Namespace, say: Callable[[str], None] = _print) -> int:
    """Serve until SIGINT, SIGTERM or (``--until-stdin-closes``) the end of stdin; the exit
    status (1: the API could not start, 2: the ``--config`` file could not be used).
    ``say`` prints the line giving the API's address."""
    _open_files_up_to_the_limit()
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(_serve_proxy(args, say))
    except HarnessError as exc:
        print(f"harness proxy: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, _ConfigError) else 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.proxy [options]``: as ``harness proxy [options]``."""
    parser = argparse.ArgumentParser(prog="python -m harness.proxy", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
