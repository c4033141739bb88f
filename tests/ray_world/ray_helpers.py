"""Running scenarios in the Ray world from tests, and reading what a report says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.run.model import Report
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import load, parse
from harness.scenario.model import Scenario

ROOT = Path(__file__).resolve().parents[2]

#: ``python -c AS_AT_A_TERMINAL ARGS...`` runs ``python ARGS...`` with SIGINT back at its
#: default action. A suite started in the background of a non-interactive shell (``cmd &``,
#: ``nohup``, CI runners that do so) runs with SIGINT ignored, every process it starts
#: inherits that, and Python then never turns SIGINT into ``KeyboardInterrupt``, nor does the
#: harness take a signal its parent chose to ignore. A test that acts as a user pressing
#: Ctrl-C at a terminal must undo it, as tests/harness/cli_helpers.py does (an exec wrapper,
#: not ``preexec_fn``, which is unsafe in a process with threads). GNU ``timeout`` undoes it
#: too, which is why a suite run under ``timeout`` never showed this.
AS_AT_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def scenario_file(name: str) -> Scenario:
    return load(ROOT / "scenarios" / name)


def built(data: dict[str, Any]) -> Scenario:
    return parse({"description": "built by a Ray world test", **data}, "<ray test>")


def run(scenario: Scenario, world: str = "ray", seed: int | None = None) -> Report:
    chosen = seed if seed is not None else (scenario.seed or 1)
    return run_one(scenario.in_world(world), embedded_proxy, chosen)


def problems(report: Report) -> str:
    lines = [report.error or "", report.skipped or "", *(v.message for v in report.violations)]
    lines += [f"node {o.node}: {o.status} {o.message}" for o in report.outcomes if o.message]
    return "\n".join(line for line in lines if line)


def statuses(report: Report) -> dict[int, str]:
    return {o.node: o.status for o in report.outcomes}
