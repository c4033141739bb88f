"""``harness fuzz`` and ``harness replay``: random scenarios on real nodes, shrunk failures.

:func:`fuzz` draws scenarios from :func:`harness.fuzz.strategies.scenarios` with hypothesis
(seeded, no example database), runs each one on real node processes and judges it with the
usual checks, the oracle's expectations and the oracle's rule on the order the run recorded
(:mod:`harness.fuzz.ordered`: no round completes with a dead member). A failing example is
shrunk by hypothesis; the last failing example it runs is the minimal one, and it is written
as a scenario file (its run seed recorded) that ``harness replay FILE`` re-runs and judges
the same way (``harness run FILE`` too, but without the order rule, which is the fuzzer's).

:func:`replay` re-runs a scenario file with the seed recorded in it (or a given one) on a
fresh embedded proxy seeded from that seed, so the proxy's toxicity rolls repeat.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

from harness.errors import ScenarioError
from harness.fuzz.oracle import summary
from harness.fuzz.ordered import DEAD_MEMBER, dead_members
from harness.fuzz.strategies import scenarios
from harness.run.model import Report
from harness.run.suite import ProxyProvider, embedded_proxy, run_one
from harness.run.worlds import capabilities_of
from harness.scenario.load import load, parse, read

__all__ = ["FuzzResult", "Runner", "fuzz", "judged", "on_backend", "replay"]

#: Runs one parsed scenario with a seed and judges it (default: real nodes, embedded proxy).
Runner = Callable[[Any, int], Report]
#: How many shrink steps may run real scenarios before the search keeps what it has.
DEFAULT_MAX_SHRINKS = 40
#: When the minimal failing scenario passes on its final rerun (its failure depends on
#: timing), how many larger failing ones are run once more, smallest first, to find one
#: that fails again and so write a file that reproduces.
CONFIRM_TRIES = 3


@dataclass
class FuzzResult:
    """What a fuzz session did.

    Attributes:
        seed: the hypothesis seed (``harness fuzz --seed`` reproduces the session).
        examples: scenarios generated and run (shrink steps not included).
        shrinks: shrink steps that ran a scenario.
        failures: failing scenarios found (0 or 1: the search stops at the first one).
        written: the scenario files written (the minimal failing one).
        kept: with ``keep``, every drawn scenario that ran, as a file (shrink steps not
            included), passing or failing.
        reports: the report of the minimal failing scenario, if any.
        skipped: why the first scenario was skipped (its world or backend cannot run here,
            e.g. the netns world without root): then nothing else runs either.
        flaky: the minimal scenario passed when hypothesis ran it once more (its failure
            depends on timing), and so did every larger failing one tried again after it
            (a rerun of the written file may pass).
        confirmed: the minimal scenario passed when run again, and the written one is the
            smallest larger failing scenario that failed again when run once more.
    """

    seed: int
    examples: int = 0
    shrinks: int = 0
    failures: int = 0
    written: list[Path] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    skipped: str | None = None
    flaky: bool = False
    confirmed: bool = False


class _Failed(AssertionError):
    """Raised inside the hypothesis test when a scenario's run fails (never escapes)."""


@dataclass
class _Search:
    budget: int
    max_shrinks: int
    runner: Runner
    progress: Callable[[str], None]
    result: FuzzResult
    keep: Path | None = None
    last: tuple[dict[str, Any], Report] | None = None
    failing: list[tuple[dict[str, Any], Report]] = field(default_factory=list)
    passed: set[str] = field(default_factory=set)

    def example(self, data: dict[str, Any]) -> None:
        if self.result.skipped is not None:
            return  # nothing runs here: draw the rest of the budget without running it
        shrinking = self.last is not None
        if shrinking and self.result.shrinks >= self.max_shrinks and data != self.last_data:
            return  # out of shrink budget: only the best example so far is run again
        key = _key(data)
        if key in self.passed:
            return  # drawn again (hypothesis can reach one scenario several ways): it passed
        report = self._run(data)
        if report.skipped is not None and not shrinking:  # (not counted as run)
            self.progress(f"[skipped] {data['name']} {summary(data)}: {report.skipped}")
            if not self.result.examples:  # the first one: nothing can run here
                self.result.skipped = report.skipped
            return
        if shrinking:
            self.result.shrinks += 1
            where = f"[shrink {self.result.shrinks}]"
        else:
            self.result.examples += 1
            where = f"[{self.result.examples}/{self.budget}]"
            if self.keep is not None:
                verdict = "it passed" if report.passed else f"failed checks: {_why(report)}"
                said = f"Drawn by `harness fuzz --seed {self.result.seed}`: {summary(data)}; "
                self.result.kept.append(_save(data, f"{said}{verdict}.", self.keep))
        self._say(where, data, report)
        if report.passed:
            self.passed.add(key)
        else:
            self.last = (data, report)
            self.failing.append(self.last)
            raise _Failed(f"{data['name']} failed: {_why(report)}")

    def confirm(self) -> None:
        """The minimal failing scenario passed when run again: run larger failing ones
        once more and keep the first that fails again — the next smallest ones, then the
        first one found (unshrunk, the likeliest to fail for good); at most
        :data:`CONFIRM_TRIES` runs. When none fails again, the minimal one stays, marked
        flaky."""
        seen = {_key(self.failing[-1][0])}
        candidates = []
        for data, _ in [*self.failing[-2::-1][: CONFIRM_TRIES - 1], self.failing[0]]:
            if _key(data) not in seen:
                seen.add(_key(data))
                candidates.append(data)
        for data in candidates:
            report = self._run(data)
            self._say("[confirm]", data, report)
            if not report.passed:
                self.last = (data, report)
                self.result.confirmed = True
                return
        self.result.flaky = True

    def _run(self, data: dict[str, Any]) -> Report:
        return judged(data, self.runner(parse(data, f"<{data['name']}>"), int(data["seed"])))

    def _say(self, where: str, data: dict[str, Any], report: Report) -> None:
        verdict = "PASS" if report.passed else f"FAIL ({_why(report)})"
        self.progress(f"{where} {data['name']} {summary(data)}  seed {data['seed']}  {verdict}")

    @property
    def last_data(self) -> dict[str, Any] | None:
        return None if self.last is None else self.last[0]


def judged(data: Mapping[str, Any], report: Report) -> Report:
    """``report`` with the oracle's verdict on the order its run recorded added (the
    ``dead_member`` rule of :mod:`harness.fuzz.ordered`); an interrupted run is left alone."""
    if not report.interrupted and report.skipped is None:
        found = dead_members(data, report.outcomes)
        report.violations.extend(found)
        if any(not v.known for v in found):  # `harness run` would not apply the rule
            report.rerun_with = "harness replay"
    return report


def _key(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


def _checks(report: Report) -> list[str]:
    """The failed checks, each once, in order (``harness error`` for a run that raised)."""
    names = list(dict.fromkeys(v.check for v in report.problems))
    return names + (["harness error"] if report.error is not None else [])


def _why(report: Report) -> str:
    return ", ".join(_checks(report))


def _first_problem(report: Report, limit: int = 300) -> str:
    text = report.problems[0].message if report.problems else (report.error or "")
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _default_runner(proxies: ProxyProvider) -> Runner:
    return lambda scenario, seed: run_one(scenario, proxies, seed)


def fuzz(
    budget: int,
    seed: int,
    out_dir: str | Path,
    progress: Callable[[str], None],
    backend: str | None = None,
    *,
    world: str | None = None,
    strategy: st.SearchStrategy[dict[str, Any]] | None = None,
    runner: Runner | None = None,
    max_shrinks: int = DEFAULT_MAX_SHRINKS,
    keep: str | Path | None = None,
) -> FuzzResult:
    """Run up to ``budget`` random scenarios; shrink and write the first failing one.

    Args:
        budget: how many scenarios to generate (shrinking runs more, at most
            ``max_shrinks``).
        seed: seeds hypothesis: the same seed draws the same scenarios.
        out_dir: where the minimal failing scenario is written, as ``<name>.toml``.
        progress: called with one line per scenario run and a final summary line.
        backend: the scenarios' ``backend`` (default: rdzv's ``static``).
        world: the world every scenario runs in (``local``, the default, or ``netns``);
            the default strategy draws only the faults that world can carry out.
        strategy: scenarios to draw (default :func:`harness.fuzz.strategies.scenarios` in
            ``world``; a strategy given here has its scenarios moved to ``world``).
        runner: runs and judges one scenario (default: real nodes, embedded proxy).
        max_shrinks: how many shrink steps may run a scenario.
        keep: a directory to write every drawn scenario that ran into, as
            ``<name>.toml`` with its seed (None: only the failing one is written).

    Returns:
        What ran and which file was written.

    Raises:
        ValueError: ``budget`` is less than 1, or ``world`` is not a world the fuzzer knows.
        ScenarioError: the strategy drew a scenario the validators reject (a bug in the
            strategy; the message names the scenario).
        OSError: ``out_dir`` (or ``keep``) cannot be created or written.
    """
    if budget < 1:
        raise ValueError(f"the fuzz budget must be at least 1 scenario, got {budget}")
    if strategy is None:
        drawn = scenarios(world=world or "local")
    else:
        drawn = strategy if world is None else strategy.map(lambda data: {**data, "world": world})
    if world is not None:
        capabilities_of(world)  # an unknown world fails here, not inside hypothesis
    if backend is not None:
        drawn = drawn.map(lambda data: on_backend(data, backend))
    result = FuzzResult(seed=seed)
    search = _Search(
        budget,
        max_shrinks,
        runner or _default_runner(embedded_proxy),
        progress,
        result,
        None if keep is None else Path(keep),
    )
    test = settings(
        max_examples=budget,
        database=None,
        deadline=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
    )(given(drawn)(search.example))
    try:
        hypothesis_seed(seed)(test)()
    except _Failed:
        pass  # the minimal failing example is search.last
    except Flaky:  # the minimal one's final rerun passed: find one that fails again
        search.confirm()
    if search.last is not None:
        data, report = search.last
        result.failures = 1
        result.reports.append(report)
        result.written.append(_write(data, report, seed, Path(out_dir)))
    progress(_closing_line(result, backend))
    return result


def on_backend(data: dict[str, Any], backend: str) -> dict[str, Any]:
    """A drawn scenario moved to ``backend``. The oracle's message patterns are rdzv's
    wording, so on any other backend they are dropped: outcomes, elapsed bounds and the
    invariants are what backends are compared on."""
    moved = {**data, "backend": backend}
    if backend != "static":
        expect = data.get("expect", {})
        entries = [{k: v for k, v in e.items() if k != "message"} for e in expect.get("nodes", [])]
        moved["expect"] = {**expect, "nodes": entries}
    return moved


def _write(data: dict[str, Any], report: Report, seed: int, out_dir: Path) -> Path:
    """Write the failing scenario (with its run seed and what failed) and check it loads."""
    description = (
        f"Found by `harness fuzz --seed {seed}` and shrunk by hypothesis: "
        f"{summary(data)}. Failed checks: {_why(report)}. "
        f"First problem: {_first_problem(report)}"
    )
    return _save(data, description, out_dir)


def _save(data: dict[str, Any], description: str, out_dir: Path) -> Path:
    """Write a drawn scenario (its run seed included) as ``<name>.toml`` in ``out_dir``,
    described by ``description``, and check that it loads."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{data['name']}.toml"
    path.write_text(tomli_w.dumps({**data, "description": description}), encoding="utf-8")
    load(path)  # what we wrote must be a valid scenario
    return path


def _closing_line(result: FuzzResult, backend: str | None = None) -> str:
    if result.skipped is not None and not result.examples:
        return f"fuzz: seed {result.seed}: nothing ran: {result.skipped}"
    ran = f"fuzz: seed {result.seed}: {result.examples} scenario(s) run"
    if result.shrinks:
        ran += f" and {result.shrinks} shrink step(s)"
    if result.kept:
        ran += f"; {len(result.kept)} drawn scenario(s) kept in {result.kept[0].parent}"
    if not result.written:
        return f"{ran}; no failure found"
    path = result.written[0]
    # module:factory: its nodes import the module; the report's replay line says how
    env = result.reports[0].rerun_env if result.reports else ""
    line = (
        f"{ran}; 1 failing scenario written to {path} "
        f"(run it: {env}harness run {path}; replay: {env}harness replay {path})"
    )
    if any(DEAD_MEMBER in _checks(report) for report in result.reports):
        line += f"; {DEAD_MEMBER} is the oracle's verdict on the run's order: replay applies it"
    if backend is not None and ":" in backend:
        module = backend.partition(":")[0]
        line += f"; its backend {backend} needs module {module!r} importable where it runs" + (
            " (PYTHONPATH as shown)" if env else " (on PYTHONPATH)"
        )
    if result.flaky:
        line += "; it passed once when run again: the failure depends on timing"
    elif result.confirmed:
        line += (
            "; the smallest failing scenario passed when run again (its failure depends on"
            " timing): the file is the smallest that failed again"
        )
    return line


def replay(
    path: str | Path,
    seed: int | None = None,
    proxies: ProxyProvider = embedded_proxy,
) -> Report:
    """Re-run a scenario file with the seed recorded in it (``seed`` overrides it), judged
    like ``harness fuzz`` judges: the checks, the file's expectations and the oracle's
    ``dead_member`` rule on the order the run recorded.

    The embedded proxy is seeded from the run seed, so its toxicity rolls and jitter repeat.

    Raises:
        ScenarioError: the file is unreadable or invalid, or it records no seed and none
            was given.
    """
    data = read(path)  # once: validated into the scenario, and judged against
    scenario = parse(data, str(path))
    chosen = seed if seed is not None else scenario.seed
    if chosen is None:
        raise ScenarioError(str(path), ["seed: the file records no seed; give one with --seed N"])
    return judged(data, run_one(scenario, proxies, chosen))
