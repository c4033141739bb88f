"""``harness list``: the scenarios of files and directories, without running them.

On a terminal, a table that fits its width: at its natural width when that fits, else the
short columns as wide as their longest word and the long ones (scenario, faults, file)
sharing the rest, wrapping at spaces and folding a name or path too long for its column
onto the next line (nothing is ever shortened). Under 60 columns, unless the table fits
unbroken, a block of ``key: value`` lines per scenario. Piped or redirected, one plain
line per scenario and nothing else, its fields separated by tabs (``cut -f1`` gives the
names)::

    f01-master-name-never-resolves<TAB>4<TAB>dns<TAB>F01<TAB>static<TAB>scenarios/F01-....toml

The backends are those the scenario runs on: its own, the other named ones
(``static``, ``torch-static``) and any its file records, less those its file marks
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
#: From this many columns on, the table is fitted to the terminal (a cell wraps at spaces,
#: a longer name or path folds onto the next line, whole); below, one line per field.
TABLE_FROM = 60
HEADS = ("scenario", "nodes", "faults", "field failure", "backends", "file")


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


def _narrowest(rows: list[tuple[str, ...]]) -> int:
    """The width of the table when each column is as narrow as its longest word (a cell is
    wrapped at spaces, never inside a word): 1 + 3 per column for borders and padding."""
    columns = zip(*rows, strict=True)
    widest = [max(len(word) for cell in column for word in cell.split()) for column in columns]
    return sum(widest) + 3 * len(widest) + 1


def _table(rows: list[tuple[str, ...]], width: int) -> Table:
    """The table at its natural width when that fits ``width``; else the short columns keep
    the width of their longest word and the long ones (scenario, faults, file) share the
    rest, wrapping at spaces and folding what is longer than their column."""
    natural = sum(max(len(cell) for cell in column) for column in zip(HEADS, *rows, strict=True))
    fitted = natural + 3 * len(HEADS) + 1 > width
    table = Table(header_style="bold", expand=fitted)
    shares = {"scenario": 3, "faults": 2, "file": 4}
    for i, head in enumerate(HEADS):
        justify: Literal["left", "right"] = "right" if head == "nodes" else "left"
        if not fitted:
            table.add_column(head, justify=justify, overflow="fold")
        elif head in shares:
            table.add_column(head, justify=justify, overflow="fold", ratio=shares[head])
        else:
            words = [w for cell in [head, *(row[i] for row in rows)] for w in cell.split()]
            table.add_column(head, justify=justify, width=max(map(len, words)))
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
    if out.width >= TABLE_FROM or _narrowest([HEADS, *rows]) <= out.width:
        out.print(_table(rows, out.width))
    else:  # too narrow even for the longest words: one unbroken line per field
        for name, *rest in rows:
            out.print(name, soft_wrap=True)
            for head, value in zip(HEADS[1:], rest, strict=True):
                out.print(f"  {head}: {value}", soft_wrap=True)
    out.print(f"{len(scenarios)} scenario(s)", soft_wrap=True)
    if any(sc.field_failure for sc in scenarios):
        out.print(f"field failures (F..) are described in {FIELD_FAILURES_DOC}", soft_wrap=True)
    return EXIT_PASSED
