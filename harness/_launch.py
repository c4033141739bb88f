"""The ``harness`` console script (and ``python -m harness``): check, then run :mod:`harness.cli`.

``rdzv`` installs with no dependencies; the harness's own (aiohttp, pydantic, rich, ...)
come with the ``harness`` extra. The script is installed either way, so it first checks
that the extra's modules can be found (without importing them) and, if any cannot, says so
in one line and exits 1 instead of failing with an import traceback. Only the standard
library is imported here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from importlib.util import find_spec

__all__ = ["INSTALL_HINT", "REQUIRED", "main", "missing"]

#: import name -> the distribution of the ``harness`` extra that provides it (kept in
#: step with ``[project.optional-dependencies] harness`` in pyproject.toml by a test).
REQUIRED: Mapping[str, str] = {
    "aiohttp": "aiohttp",
    "hypothesis": "hypothesis",
    "jinja2": "jinja2",
    "multiprocess": "multiprocess",
    "psutil": "psutil",
    "pydantic": "pydantic",
    "requests": "requests",
    "rich": "rich",
    "tomli_w": "tomli-w",
    "toxiproxy": "toxiproxy-python",
}

INSTALL_HINT = "pip install 'rdzv-harness[harness]' (from a checkout: pip install '.[harness]')"


def missing() -> list[str]:
    """The distributions of the ``harness`` extra whose modules cannot be found, sorted."""
    return sorted(dist for module, dist in REQUIRED.items() if find_spec(module) is None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``harness`` command; returns the exit status.

    Returns:
        1, after one line on stderr, when the ``harness`` extra is not installed;
        otherwise whatever :func:`harness.cli.main` returns.
    """
    absent = ", ".join(missing())
    if absent:
        reason = f"the harness needs its extra, which is not installed here (missing: {absent})"
        print(f"harness: {reason}; install it with: {INSTALL_HINT}", file=sys.stderr)
        return 1
    from harness.cli import main as cli_main

    return cli_main(argv)
