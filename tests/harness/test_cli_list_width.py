"""``harness list`` on terminals of every width: a table whose headings stay whole, else
one block of ``key: value`` lines per scenario."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import harness_on_terminal

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("columns", [80, 70])
def test_list_fits_a_table_to_the_terminal_with_every_heading_whole(columns: int) -> None:
    status, shown, err = harness_on_terminal("list", "scenarios", cwd=ROOT, columns=columns)
    assert status == 0, err
    lines = shown.splitlines()
    assert max(map(len, lines)) <= columns
    headings = next(line for line in lines if "scenario" in line)
    for word in ("scenario", "nodes", "faults", "failure", "backends", "file"):
        assert re.search(rf"┃ +{word} *┃", headings), headings  # never 'fau' over 'lts'


def test_list_on_a_terminal_too_narrow_for_whole_headings_prints_blocks() -> None:
    status, shown, err = harness_on_terminal("list", "scenarios", cwd=ROOT, columns=64)
    assert status == 0, err
    assert "│" not in shown and "┃" not in shown  # no table with 'fau' over 'lts'
    lines = shown.splitlines()
    at = lines.index("f01-worker-before-master-dns")
    assert lines[at + 1 : at + 3] == ["  nodes: 4", "  faults: dns, late_start"]
