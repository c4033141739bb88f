"""``harness list``: the scenarios of files and directories, without running them.

On a terminal, a table that fits its width: at its natural width when that fits, else the
short columns as wide as their longest word and the long ones (scenario, faults, file)
sharing the rest, wrapping at spaces and folding a name or path too long for its column
onto the next line (nothing is ever shortened). Where that would leave a column narrower
than its heading (below about 70 columns), a block of ``key: value`` lines per scenario
instead. Piped or redirected, one plain
line per scenario and nothing else, its fields separated by tabs (``cut -f1`` gives the
names)::

    f01-master-name-never-resolves<TAB>4<TAB>dns<TAB>F01<TAB>static<TAB>scenarios/F01-....toml

The backends are those the scenario runs on: its own, the other named ones
(``static``, ``torch-static``, ``torch-c10d``) and any its file records, less those its file marks
``[backends.NAME] unsupported``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal

from rich.table import Table

from harness.cli.common import (
    EXIT_PASSED,
    EXIT_USAGE,
    data_console,
    load_scenarios,
    silence_stdout,
)
from harness.scenario.model import NAMED_BACKENDS, Scenario

__all__ = ["DEFAULT_PATH", "add_command", "runs_on"]

DEFAULT_PATH = "scenarios"
#: Where the field failures that scenarios cite (``field_failure = "F28"``) are described.
FIELD_FAILURES_DOC = "docs/field-failures.md"
HEADS = ("scenario", "nodes", "faults", "field failure", "backends", "file")
#: How the long columns share what the short ones leave of a narrow terminal.
SHARES = {"scenario": 3, "faults": 2, "file": 4}


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list`` to the top-level subparsers."""
    listing = commands.add_parser(
        "list",
        help="list scenario files",
        description="List scenarios without running them: a table on a terminal, one "
        "tab-separated line per scenario (name, nodes, faults, field failure, backends, "
        "file) when piped.",
    )
    listing.add_argument(
        "paths", nargs="*", metavar="PATH", help=f"files or directories (default {DEFAULT_PATH}/)"
    )
    listing.set_defaults(func=_list_command)


def runs_on(scenario: Scenario) -> list[str]:
    """The backends ``scenario`` runs on: its own first, then the other named ones and
    those its file records, less those ``[backends.NAME] unsupported`` rules out."""
    names = [scenario.backend, *NAMED_BACKENDS, *scenario.backends]
    unique = list(dict.fromkeys(names))
    return [b for b in unique if b not in scenario.backends or not scenario.backends[b].unsupported]


def _fault_names(scenario: Scenario) -> str:
    names: list[str] = []
    for fault in scenario.fault:
        detail = getattr(fault, "type", None) or getattr(fault, "mode", None)
        if fault.kind == "store_op":
            detail = f"{getattr(fault, 'action', '')} {getattr(fault, 'op', '')}"
        name = f"{fault.kind} {detail}" if detail else fault.kind
        if name not in names:
            names.append(name)
    return ", ".join(names) or "-"


def _row(scenario: Scenario) -> tuple[str, ...]:
    return (
        scenario.name,
        str(scenario.nodes),
        _fault_names(scenario),
        scenario.field_failure or "-",
        ", ".join(runs_on(scenario)) or "-",
        scenario.path or "-",
    )


#: The narrowest file column a table gets: ``scenarios/`` and a little more per line.
_MIN_FILE = 12


def _widths(rows: list[tuple[str, ...]], width: int) -> list[int] | None:
    """The widths of the table's columns (their text, without borders) on a terminal
    ``width`` wide: the natural ones when they fit; else the short columns as wide as their
    longest word and scenario, faults and file sharing the rest 3:2:4 (scenario and faults
    at least as wide as their headings, taken from file). None when a column would be
    narrower than its heading (``fau``/``lts``) or file narrower than :data:`_MIN_FILE`:
    too narrow for a table."""
    columns = list(zip(HEADS, *rows, strict=True))
    natural = [max(map(len, column)) for column in columns]
    frame = 3 * len(HEADS) + 1  # borders and padding
    if sum(natural) + frame <= width:
        return natural
    words = [max(len(w) for cell in column for w in cell.split()) for column in columns]
    rest = width - frame - sum(w for h, w in zip(HEADS, words, strict=True) if h not in SHARES)
    # a shared column gets its share, and never less than its heading's longest word: the
    # file column (the widest share, whose paths fold anywhere) gives up what that takes
    widths = [max(rest * SHARES[h] // sum(SHARES.values()), *map(len, h.split()))
              if h in SHARES else w
              for h, w in zip(HEADS, words, strict=True)]  # fmt: skip
    widths[HEADS.index("file")] += width - frame - sum(widths)  # what rounding left over
    heading_fits = all(widths[i] >= max(map(len, h.split())) for i, h in enumerate(HEADS))
    file_reads = widths[HEADS.index("file")] >= _MIN_FILE  # else a path is a dozen lines
    return widths if heading_fits and file_reads else None


def _table(rows: list[tuple[str, ...]], widths: list[int]) -> Table:
    """The table with columns ``widths`` wide: a cell wraps at spaces, and a name, path or
    word longer than its column folds onto the next line (nothing is ever shortened)."""
    table = Table(header_style="bold")
    for head, wide in zip(HEADS, widths, strict=True):
        justify: Literal["left", "right"] = "right" if head == "nodes" else "left"
        table.add_column(head, justify=justify, overflow="fold", width=wide)
    for row in rows:
        table.add_row(*row)
    return table


def _list_command(args: argparse.Namespace) -> int:
    if not args.paths and not Path(DEFAULT_PATH).is_dir():
        print(
            f"harness list: no {DEFAULT_PATH}/ directory in {Path.cwd()}; run it from the "
            f"repository's top directory, or name scenario files or directories: "
            f"harness list PATH...",
            file=sys.stderr,
        )
        return EXIT_USAGE
    scenarios = load_scenarios("list", args.paths or [DEFAULT_PATH])
    if scenarios is None:
        return EXIT_USAGE
    rows = [_row(sc) for sc in scenarios]
    if not sys.stdout.isatty():  # piped: one plain line per scenario, nothing else
        try:
            sys.stdout.write("".join("\t".join(row) + "\n" for row in rows))
            sys.stdout.flush()
        except BrokenPipeError:  # | head -1: the reader has what it wanted
            silence_stdout()
        return EXIT_PASSED
    out = data_console()
    widths = _widths(rows, out.width)
    if widths is not None:
        out.print(_table(rows, widths))
    else:  # too narrow for a table: one unbroken line per field
        for name, *rest in rows:
            out.print(name, soft_wrap=True)
            for head, value in zip(HEADS[1:], rest, strict=True):
                out.print(f"  {head}: {value}", soft_wrap=True)
    out.print(f"{len(scenarios)} scenario(s)", soft_wrap=True)
    if any(sc.field_failure for sc in scenarios):
        out.print(f"field failures (F..) are described in {FIELD_FAILURES_DOC}", soft_wrap=True)
    return EXIT_PASSED
