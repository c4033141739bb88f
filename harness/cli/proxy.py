"""``harness proxy``: the embedded fault proxy as a standalone Toxiproxy-compatible server
(:mod:`harness.proxy.server`, which ``python -m harness.proxy`` runs too)."""

from __future__ import annotations

import argparse

from harness.cli.common import say
from harness.proxy.server import DESCRIPTION, add_arguments, port_number, run

__all__ = ["add_command", "port_number"]


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``proxy`` to the top-level subparsers."""
    proxy = commands.add_parser(
        "proxy", help="run the embedded Toxiproxy-compatible fault proxy", description=DESCRIPTION
    )
    add_arguments(proxy)
    proxy.set_defaults(func=lambda args: run(args, say))
