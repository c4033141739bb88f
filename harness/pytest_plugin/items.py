"""Collection: scenario files as items, one run each, and how a failed run is shown.

Every file matching the ini glob ``harness_scenarios``, and any ``.toml`` file named on the
command line, is one :class:`ScenarioFile` yielding one :class:`ScenarioItem` (marked
``harness_scenario``). An invalid file is a collection error naming the file and its bad
keys; a failing item shows the failed checks, each node's outcome, the seed and the command
that replays it. Every item that ran carries a report section, ``harness nodes``: what each
node said and did (pytest shows it for a passing item with ``-rP``, for a failing one always).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harness.pytest_plugin.options import MARKER, REPORTS, overrides, seed_override
from harness.pytest_plugin.session import proxies, session_for

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from harness.run.model import Report
    from harness.scenario.model import Scenario

__all__ = ["ScenarioFailed", "ScenarioFile", "ScenarioItem", "pytest_collect_file"]

_MATCHES = pytest.StashKey[frozenset[Path]]()


def _matches(config: pytest.Config) -> frozenset[Path]:
    if _MATCHES not in config.stash:
        root = config.rootpath
        found = {p.resolve() for g in config.getini("harness_scenarios") for p in root.glob(g)}
        # a .toml file named on the command line is collected even outside the globs, so
        # `pytest scenarios/scale/x.toml` runs it instead of answering "not found"
        where = config.invocation_params.dir
        named = {(where / arg.split("::")[0]).resolve() for arg in config.args}
        found |= {p for p in named if p.suffix == ".toml"}
        config.stash[_MATCHES] = frozenset(p for p in found if p.is_file())
    return config.stash[_MATCHES]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    if file_path.suffix != ".toml" or file_path.resolve() not in _matches(parent.config):
        return None
    file: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return file


class ScenarioFile(pytest.File):
    """One scenario file: yields a single :class:`ScenarioItem`."""

    def collect(self) -> Iterator[ScenarioItem]:
        from harness._launch import INSTALL_HINT, missing

        absent = missing()
        if absent:  # rdzv installed without the harness extra: say so, no import traceback
            raise self.CollectError(
                f"cannot run scenario files: the harness extra is not installed here "
                f"(missing: {', '.join(absent)}); install it with: {INSTALL_HINT}"
            )
        from harness.errors import ScenarioError
        from harness.scenario.load import load

        try:
            scenario = load(self._shown_path())
        except ScenarioError as exc:
            problems = "\n".join(f"  - {p}" for p in exc.problems)
            raise self.CollectError(f"invalid scenario {exc.source}:\n{problems}") from exc
        scenario = scenario.model_copy(update=overrides(self.config))
        yield ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)

    def _shown_path(self) -> str:
        """The path as the replay command shows it: relative to where pytest ran."""
        here = self.config.invocation_params.dir
        try:
            return str(self.path.relative_to(here))
        except ValueError:
            return os.fspath(self.path)


class ScenarioFailed(AssertionError):
    """A scenario item's run broke a check or an expectation (carries the report)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__(f"scenario {report.scenario.name} failed (seed {report.seed})")


class ScenarioItem(pytest.Item):
    """One run of one scenario, with the session's seed policy and proxy."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker(MARKER)

    def runtest(self) -> None:
        from harness.run.one import run_one
        from harness.run.seed import choose_seed, fresh_seed

        override, _ = seed_override(self.config)
        seed = choose_seed(self.scenario, override, fresh_seed)
        session_for(self.config, self.scenario)
        report = run_one(self.scenario, proxies(self.config), seed)
        self.config.stash[REPORTS].append(report)
        if report.skipped is None:  # what the nodes said: pytest shows it for passes with -rP
            from harness.report.details import detail_lines

            self.add_report_section("call", "harness nodes", "\n".join(detail_lines(report)))
        if report.skipped is not None:
            pytest.skip(report.skip_reason or report.skipped)
        if not report.passed:
            raise ScenarioFailed(report)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ScenarioFailed):
            from harness.report.failure import failure_text

            return failure_text(excinfo.value.report)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.scenario.name}"
