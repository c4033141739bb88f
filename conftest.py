"""Configuration shared by every test of the repository (``tests/`` and ``scenarios/``).

Without torch, each torch-compat test skips where its own ``pytest.importorskip`` runs, so
``pytest -ra`` would print one "No module named 'torch'" line per test location (over a
hundred). The hook below reports every skip caused by torch itself being absent at one
location with one reason, so pytest folds them into a single summary line::

    SKIPPED [142] conftest.py:NN: torch is not installed (pip install -e ...)

Tests that need a real Toxiproxy (``TOXIPROXY_URL``) fold the same way. Any other skip
(torch installed but a submodule failing to import, a missing descriptor
limit, ...) keeps its own location and reason. With torch installed nothing is changed.
"""

from __future__ import annotations

import re
from collections.abc import Generator

import pytest

#: ``pytest.importorskip``'s reason when the module ``torch`` itself is absent.
_TORCH_ABSENT = re.compile(r"could not import 'torch(?:\.[\w.]+)?': No module named 'torch'$")

#: The one reason shown for all of them (worded as ``harness.backends`` words it).
TORCH_ABSENT_REASON = "torch is not installed (pip install -e '.[torch]' installs torch==2.13.0)"

#: The tests that run only against a real Toxiproxy server (tests/harness/conftest.py).
_NO_TOXIPROXY = re.compile(r"\bset TOXIPROXY_URL=")
NO_TOXIPROXY_REASON = "set TOXIPROXY_URL=http://host:port to run against a real Toxiproxy"

#: Skips that depend on this machine's environment, not on the test: each pattern is shown
#: as one line with one reason, wherever the tests that skip for it live.
_FOLDED = ((_TORCH_ABSENT, TORCH_ABSENT_REASON), (_NO_TOXIPROXY, NO_TOXIPROXY_REASON))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple):
        _, _, reason = report.longrepr
        for pattern, shown in _FOLDED:
            if pattern.search(reason):
                line = pytest_runtest_makereport.__code__.co_firstlineno
                report.longrepr = (__file__, line, shown)
                break
    return report
