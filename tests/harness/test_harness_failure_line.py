"""A harness failure is one line: the cause, whose fault it is, the traceback's file (issue 29)."""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.errors import ToxiproxyTimeoutError
from harness.proxy.client import ToxiproxyClient
from harness.run.suite import run_one
from harness.scenario.load import parse
from harness.scenario.model import Scenario


def _scenario(backend: str = "static") -> Scenario:
    data = {"name": "one-line", "description": "d", "nodes": 2, "backend": backend}
    return parse(data, "<test>")


def _failing(raiser: Callable[[], object]) -> object:
    @contextlib.contextmanager
    def proxies() -> Iterator[ToxiproxyClient]:
        raiser()
        yield ToxiproxyClient()

    return proxies


def _traceback_file(error: str) -> Path:
    found = re.search(r"\(traceback: (\S+)\)$", error)
    assert found is not None, error
    path = Path(found.group(1))
    assert path.is_file()
    return path


def _reported(raiser: Callable[[], object], *, names: str, backend: str = "static") -> str:
    """The report's error when the run's proxy provider calls ``raiser``: checked to be one
    line naming a traceback file that holds ``names`` (the file is removed)."""
    report = run_one(_scenario(backend), _failing(raiser), seed=1)  # type: ignore[arg-type]
    error = report.error
    assert error is not None
    assert "\n" not in error
    path = _traceback_file(error)
    text = path.read_text()
    path.unlink()
    assert "Traceback (most recent call last)" in text
    assert names in text
    return error


def test_a_proxy_that_does_not_answer_is_one_line_naming_the_cause_and_the_traceback_file() -> None:
    def timeout() -> None:
        raise ToxiproxyTimeoutError(
            "toxiproxy at http://127.0.0.1:1 did not answer POST /populate within 10.0 s"
        )

    assert _reported(timeout, names="ToxiproxyTimeoutError").startswith(
        "the harness could not run the scenario: toxiproxy at http://127.0.0.1:1 did not"
        " answer POST /populate within 10.0 s (traceback: "
    )


def test_an_unexpected_exception_is_reported_as_a_bug_in_the_harness() -> None:
    def bug() -> None:
        {}["missing"]

    assert _reported(bug, names="KeyError").startswith(
        "internal error (a bug in the harness: please report it with the traceback):"
        " KeyError: 'missing' (traceback: "
    )


def test_the_users_backend_raising_in_the_harness_is_told_apart_from_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tenk_user_backend.py").write_text(
        "def factory(params):\n    raise RuntimeError('my backend is broken')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("tenk_user_backend")

    error = _reported(
        lambda: module.factory(None),
        names="my backend is broken",
        backend="tenk_user_backend:factory",
    )
    assert error.startswith(
        "the backend tenk_user_backend:factory failed in the harness (your code):"
        " RuntimeError: my backend is broken (traceback: "
    )
