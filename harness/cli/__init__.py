"""The ``harness`` command line: ``harness run | list | fuzz | replay | proxy | from-log``.

Each command is an argparse subparser whose ``func`` default takes the parsed arguments and
returns the exit status, so new commands plug in with one ``add_parser`` call:

* ``common``   what the commands share: exit statuses, argument types, loading
* ``run``      ``run``
* ``listing``  ``list``
* ``fuzz``     ``fuzz`` and ``replay``
* ``proxy``    ``proxy``: the embedded fault proxy as a server
* ``from_log`` ``from-log``: a failed start-up's logs -> a scenario file (:mod:`harness.logs`)

:func:`main` is the entry point (``harness._launch`` calls it once the ``harness`` extra is
known to be installed; ``python -m harness.cli`` runs it directly). The CLI is the top
layer: it may import every other part of the harness; nothing imports it.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.metadata
import signal
import sys
from collections.abc import Sequence

from harness.cli.from_log import add_command as add_from_log_command
from harness.cli.fuzz import add_commands as add_fuzz_commands
from harness.cli.listing import add_command as add_list_command
from harness.cli.proxy import add_command as add_proxy_command
from harness.cli.run import add_commands

__all__ = ["build_parser", "main", "version"]


def version() -> str:
    """``VERSION (DISTRIBUTION)`` of the installed distribution that ships the ``harness``
    package, or says that none is installed (running from a source tree)."""
    for name in importlib.metadata.packages_distributions().get("harness", []):
        try:
            return f"{importlib.metadata.version(name)} ({name})"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown: no installed distribution ships this harness (running from a source tree)"


class _Version(argparse.Action):
    """``--version``: look the version up only when asked, print it, exit 0."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per command."""
    parser = argparse.ArgumentParser(prog="harness", description="rdzv fault-injection harness")
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show the installed version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_commands(commands)
    add_list_command(commands)
    add_fuzz_commands(commands)
    add_proxy_command(commands)
    add_from_log_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``harness`` console script; returns the exit status.

    ``kill -USR1 <pid>`` makes a running harness print every thread's stack to stderr and
    go on: the way to see where a run that seems stuck is waiting.
    """
    args = build_parser().parse_args(argv)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
    status: int = args.func(args)
    return status
