"""``harness from-log``: a failed start-up's logs in, a scenario file that replays it out.

Reads each ``LOG`` (``-``: stdin), writes the scenario to ``-o FILE`` (default: stdout) and
prints to stderr what it inferred (from which lines), what it assumed and why, and what it
could not reproduce; ``--explain`` adds every line read and what it said. Exit status 0
when a scenario was written, 2 when the logs cannot be read or say too little (the message
says what is missing) or the output cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.common import EXIT_PASSED, EXIT_USAGE

__all__ = ["add_command"]


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``from-log`` to the top-level subparsers."""
    parser = commands.add_parser(
        "from-log",
        help="write the scenario that replays a failed start-up's logs",
        description="Read the logs of a failed start-up (torch's formats across releases, "
        "torchrun's, rdzv's events, the harness's reports; one file per node or several "
        "nodes' lines in one) and write a scenario file that `harness run` replays. Each "
        "fault in it quotes the log lines it came from; what had to be assumed is said.",
    )
    parser.add_argument("logs", nargs="+", metavar="LOG", help="a log file, or - for stdin")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="write the scenario here (default: stdout)",
    )
    parser.add_argument(
        "--name", help="the scenario's name (default: the output file's stem, else from-log)"
    )
    parser.add_argument(
        "--explain", action="store_true", help="also print every line read and what it said"
    )
    parser.set_defaults(func=_from_log_command)


def _read(logs: list[str]) -> list[tuple[str, str]]:
    out = []
    for name in logs:
        if name == "-":
            out.append(("-", sys.stdin.read()))
            continue
        out.append((name, Path(name).read_text(encoding="utf-8", errors="replace")))
    return out


def _from_log_command(args: argparse.Namespace) -> int:
    from harness.logs import FromLogError, convert

    try:
        logs = _read(args.logs)
    except OSError as exc:
        print(f"harness from-log: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    name = args.name or (args.output.stem if args.output else "from-log")
    try:
        conversion = convert(logs, name=name)
    except FromLogError as exc:
        print(f"harness from-log: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in conversion.summary():
        print(line, file=sys.stderr)
    if args.explain:
        print("trace:", file=sys.stderr)
        for line in conversion.trace():
            print(f"  {line}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(conversion.text)
        return EXIT_PASSED
    try:
        args.output.write_text(conversion.text, encoding="utf-8")
    except OSError as exc:
        print(
            f"harness from-log: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr
        )
        return EXIT_USAGE
    print(f"wrote {args.output}; run it with: harness run {args.output}", file=sys.stderr)
    return EXIT_PASSED
