"""The scenario items' reports: JUnit XML and the HTML timeline, written at the end of the
session to ``--harness-report`` / ``harness_report``, and named in the terminal summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.options import REPORTS, report_dir

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary"]

_WRITTEN = pytest.StashKey[list[Path]]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    where = report_dir(config)
    reports = config.stash.get(REPORTS, [])
    if where is None or not reports:
        return
    import datetime as dt

    from harness.report.html import write_html
    from harness.report.junit import write_junit

    now = dt.datetime.now(dt.UTC)
    where.mkdir(parents=True, exist_ok=True)
    junit, html = where / "junit.xml", where / "report.html"
    write_junit(reports, junit, suite_name="harness", timestamp=f"{now:%Y-%m-%dT%H:%M:%S}")
    write_html(reports, html, generated=f"{now:%Y-%m-%d %H:%M:%S} UTC")
    config.stash[_WRITTEN] = [junit, html]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, [])
    if written:
        terminalreporter.write_line(f"harness: wrote {', '.join(map(str, written))}")
