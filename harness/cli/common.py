"""What the ``harness`` commands share: exit statuses, argument types, the data console,
and loading scenario files (saying on stderr what is wrong with them).

Everything read from files is data: it is printed literally (rich markup and ``:emoji:``
codes are off on :func:`data_console`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from rich.console import Console

from harness.errors import InvalidScenariosError, ScenarioError
from harness.proxy.address import parse_api_address
from harness.run.model import Report
from harness.scenario.load import load_many
from harness.scenario.model import Scenario, backend_name

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "at_least_one",
    "backend_arg",
    "data_console",
    "jobs_arg",
    "load_scenarios",
    "nothing_ran",
    "pack_arg",
    "parse_address",
    "print_invalid",
    "report_file",
    "say",
    "silence_stdout",
]

#: Exit statuses: every scenario passed / some failed / the command could not run or
#: nothing ran / interrupted (Ctrl-C).
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``http://HOST:PORT`` -> ``(host, port)``.

    Raises:
        argparse.ArgumentTypeError: not one of those forms, or the port is out of range.
    """
    try:
        return parse_api_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _whole_number(text: str, least: int, wanted: str) -> int:
    """``text`` as a whole number of at least ``least``, else a usage error that says what
    was ``wanted``."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < least:
        raise argparse.ArgumentTypeError(f"{wanted}, got {text!r}")
    return value


def jobs_arg(text: str) -> int | Literal["auto"]:
    """argparse type of ``-j``: ``auto`` or a whole number of at least 1."""
    if text.strip().lower() == "auto":
        return "auto"
    return _whole_number(text, 1, "-j takes auto or a whole number of at least 1")


def at_least_one(option: str) -> Callable[[str], int]:
    """argparse type of ``option``: a whole number of at least 1, else a usage error."""

    def parse(text: str) -> int:
        return _whole_number(text, 1, f"{option} takes a whole number of at least 1")

    return parse


def pack_arg(text: str) -> int:
    """argparse type of ``--pack``: a whole number of at least 2, else a usage error."""
    return _whole_number(text, 2, "--pack takes a whole number of nodes per process of at least 2")


def backend_arg(text: str) -> str:
    """argparse type of ``--backend``: a backend name, else a usage error."""
    try:
        return backend_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def report_file(text: str) -> Path:
    """argparse type of ``--junit``/``--html``: a file this process can write, checked before
    anything runs (a directory, a missing directory or one it cannot write in is a usage
    error). The check creates the file if it did not exist, then removes it again.

    Raises:
        argparse.ArgumentTypeError: ``text`` names a directory, sits in a directory that
            does not exist, or cannot be opened for writing (the reason is given).
    """
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name in it")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: directory {str(parent)!r} {what}")
    existed = path.exists()
    try:
        with open(path, "ab" if existed else "xb"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {reason}") from exc
    if not existed:
        path.unlink()
    return path


def silence_stdout() -> None:
    """Send the rest of stdout to the null device: its reader went away (``| head -1``).
    The command goes on and ends with its own exit status: a reader that stopped reading
    is not a failed scenario (rich's default is to exit 1 at once, saying nothing)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def say(line: str) -> None:
    """Print ``line`` on stdout at once; nothing once stdout's reader has gone away."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        silence_stdout()


class _DataConsole(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence_stdout()


def data_console() -> Console:
    """A console for output made of data (names, paths, messages): no markup, no emoji
    codes, no highlighting, so every character is printed as it is. On a terminal (or with
    ``COLUMNS`` set) it is as wide as that says; else 160 columns, for CI logs. When its
    reader goes away it goes quiet (:func:`silence_stdout`) instead of exiting."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return _DataConsole(highlight=False, markup=False, emoji=False, width=None if wide else 160)


def print_invalid(command: str, exc: ScenarioError) -> None:
    """Name every bad file of ``exc`` and each of its problems on stderr."""
    errors = exc.errors if isinstance(exc, InvalidScenariosError) else (exc,)
    for error in errors:
        problems = "\n".join(f"  - {p}" for p in error.problems)
        print(f"harness {command}: invalid scenario {error.source}:\n{problems}", file=sys.stderr)
    if isinstance(exc, InvalidScenariosError) and len(errors) > 1:
        outcome = "nothing listed" if command == "list" else "nothing ran"
        print(
            f"harness {command}: {len(errors)} scenario paths are invalid; {outcome}",
            file=sys.stderr,
        )


def nothing_ran(reports: Sequence[Report]) -> str | None:
    """Why a run in which no scenario ran (every one skipped) is not a success, else None."""
    if not reports or any(r.skipped is None for r in reports):
        return None
    reasons = sorted(
        {str(r.skip_reason).removeprefix("not run: ").removeprefix("not run ") for r in reports}
    )
    return "nothing ran: every scenario was skipped (" + "; ".join(reasons) + ")"


def load_scenarios(command: str, paths: Sequence[str]) -> list[Scenario] | None:
    """The scenarios of ``paths``, or None after saying on stderr why there are none (bad
    files, each with its problems; no ``*.toml`` under a path)."""
    try:
        scenarios = load_many(paths)
    except ScenarioError as exc:
        print_invalid(command, exc)
        return None
    if not scenarios:
        where = ", ".join(paths)
        print(f"harness {command}: no scenario files (*.toml) in {where}", file=sys.stderr)
        return None
    return scenarios
