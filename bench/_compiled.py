"""``bench_store.py --compiled``: rdzv's store fast path compiled with mypyc, for a measured
figure of what a compiled fast path would give. Never shipped: the package is copied into a
temporary directory, the one module (:data:`MODULE`) is compiled there, servers started
with :func:`prelude` import that copy, and the directory is removed when the run ends."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

#: The module compiled: the fast path (parse, table, reply), one plain function over bytes.
MODULE = "rdzv/store/state/_fast.py"


@contextmanager
def compiled_tree(repo: str) -> Iterator[str | None]:
    """A temporary copy of ``repo``'s ``rdzv`` with :data:`MODULE` compiled by mypyc; None
    (saying why) when mypyc is missing or fails. Removed on exit."""
    tmp = tempfile.mkdtemp(prefix="rdzv-mypyc-")
    try:
        shutil.copytree(
            os.path.join(repo, "rdzv"),
            os.path.join(tmp, "rdzv"),
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", MODULE],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-300:]
            print(f"compiled fast path: not run (mypyc exit {done.returncode}: {tail})")
            yield None
        else:
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prelude(tree: str) -> str:
    """Code that makes a server process import the compiled copy at ``tree`` (and fail if
    the fast path it imports is not the compiled one)."""
    return (
        f"import sys; sys.path.insert(0, {tree!r})\n"
        "import rdzv.store.state._fast as _compiled\n"
        "assert _compiled.__file__.endswith('.so'), _compiled.__file__\n"
    )
