"""``harness run`` and ``harness list``: the commands that load and run scenario files.

``run`` loads every scenario first (an invalid file stops everything with exit status 2,
naming the file and its bad keys), starts the embedded Toxiproxy-API server unless
``--toxiproxy`` names a real one, runs the scenarios ``-j`` at a time, shows progress (a
rich progress bar on a terminal, one plain line per finished scenario otherwise, so CI
logs stay readable), prints the summary, writes the JUnit and HTML reports when asked, and
exits 1 when any scenario failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from harness.address import parse_api_address
from harness.errors import HarnessError, ScenarioError
from harness.model import Report
from harness.report import print_summary, result_line, write_junit
from harness.report_html import write_html
from harness.scenario import Scenario, backend_name, load_many
from harness.suite import ProxyProvider, embedded_proxy, run_suite, shared_proxy
from harness.toxiproxy_client import ToxiproxyClient

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "add_commands",
    "at_least_one",
    "backend_arg",
    "parse_address",
]

DEFAULT_PATH = "scenarios"
#: Exit statuses: every scenario passed / some failed / the command itself could not run.
EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``http://HOST:PORT`` -> ``(host, port)``.

    Raises:
        argparse.ArgumentTypeError: not one of those forms, or the port is out of range.
    """
    try:
        return parse_api_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def at_least_one(option: str) -> Callable[[str], int]:
    """argparse type of ``option``: a whole number of at least 1, else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{option} takes a whole number of at least 1, got {text!r}"
            )
        return value

    return parse


def backend_arg(text: str) -> str:
    """argparse type of ``--backend``: a backend name, else a usage error."""
    try:
        return backend_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` and ``list`` to the top-level subparsers."""
    run = commands.add_parser(
        "run",
        help="run scenario files and judge them",
        description="Run scenario files (or every *.toml below a directory) and judge them; "
        "exit status 1 when any scenario fails, 2 when a file is invalid.",
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    run.add_argument("--seed", type=int, help="seed every scenario with N (default: its own)")
    run.add_argument(
        "-j",
        "--jobs",
        type=at_least_one("-j"),
        default=1,
        metavar="N",
        help="scenarios at once (default 1)",
    )
    run.add_argument(
        "--backend",
        type=backend_arg,
        metavar="NAME",
        help="run every scenario on this backend: static (rdzv), torch-static or "
        "module:factory (default: each file's own); [backends.NAME] in a file records "
        "how that backend differs",
    )
    run.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report")
    run.add_argument("--html", type=Path, metavar="FILE", help="write an HTML timeline report")
    run.add_argument(
        "--toxiproxy",
        type=parse_address,
        metavar="HOST:PORT",
        help="use this real Toxiproxy server instead of the embedded one",
    )
    run.set_defaults(func=_run_command)
    listing = commands.add_parser(
        "list", help="list scenario files", description="List scenarios without running them."
    )
    listing.add_argument(
        "paths", nargs="*", metavar="PATH", help=f"files or directories (default {DEFAULT_PATH}/)"
    )
    listing.set_defaults(func=_list_command)


def _console() -> Console:
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(highlight=False, width=160)  # CI logs: wide enough not to fold names


def _load(command: str, paths: Sequence[str]) -> list[Scenario] | None:
    try:
        scenarios = load_many(paths)
    except ScenarioError as exc:
        problems = "\n".join(f"  - {p}" for p in exc.problems)
        print(f"harness {command}: invalid scenario {exc.source}:\n{problems}", file=sys.stderr)
        return None
    if not scenarios:
        where = ", ".join(paths)
        print(f"harness {command}: no scenario files (*.toml) in {where}", file=sys.stderr)
        return None
    return scenarios


def _proxies(address: tuple[str, int] | None) -> ProxyProvider:
    """The real server at ``address`` for every run, or a fresh embedded one per run."""
    if address is None:
        return embedded_proxy
    client = ToxiproxyClient(*address)
    client.version()  # fail now, clearly, rather than once per scenario
    return shared_proxy(client)


def _progress_run(
    scenarios: Sequence[Scenario], proxies: ProxyProvider, args: argparse.Namespace, out: Console
) -> list[Report]:
    total = len(scenarios)
    if not out.is_terminal:
        done = 0

        def line(report: Report) -> None:
            nonlocal done
            done += 1
            out.print(result_line(report, done, total), soft_wrap=True, markup=False)

        return run_suite(scenarios, proxies, args.jobs, args.seed, on_result=line)
    running: list[str] = []
    columns = (
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=out, transient=True) as progress:
        task = progress.add_task("starting", total=total)

        def describe() -> None:
            progress.update(task, description=", ".join(running) or "finishing")

        def start(scenario: Scenario) -> None:
            running.append(scenario.name)
            describe()

        def finish(report: Report) -> None:
            running.remove(report.scenario.name)
            style = "red" if not report.passed else "yellow" if report.skipped else "green"
            progress.console.print(result_line(report), style=style, soft_wrap=True, markup=False)
            progress.advance(task)
            describe()

        return run_suite(scenarios, proxies, args.jobs, args.seed, finish, start)


def _write(what: str, path: Path, write: Callable[[], None]) -> bool:
    try:
        write()
    except OSError as exc:
        print(f"harness run: cannot write the {what} to {path}: {exc}", file=sys.stderr)
        return False
    return True


def _run_command(args: argparse.Namespace) -> int:
    scenarios = _load("run", args.paths)
    if scenarios is None:
        return EXIT_USAGE
    if args.backend is not None:
        scenarios = [sc.on_backend(args.backend) for sc in scenarios]
    out = _console()
    now = dt.datetime.now(dt.UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S")  # the JUnit schema's form (no zone)
    began = time.monotonic()
    try:
        reports = _progress_run(scenarios, _proxies(args.toxiproxy), args, out)
    except KeyboardInterrupt:
        print("harness run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except HarnessError as exc:  # the proxy server could not start or be reached
        where = "--toxiproxy" if args.toxiproxy else "the embedded toxiproxy"
        print(f"harness run: {where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    wall = time.monotonic() - began
    print_summary(reports, out, wall)
    written = True
    if args.junit is not None:
        written &= _write(
            "JUnit report", args.junit, lambda: write_junit(reports, args.junit, timestamp=stamp)
        )
    if args.html is not None:
        written &= _write(
            "HTML report",
            args.html,
            lambda: write_html(reports, args.html, generated=f"{now:%Y-%m-%d %H:%M:%S} UTC"),
        )
    if not written:
        return EXIT_USAGE
    return EXIT_PASSED if all(r.passed for r in reports) else EXIT_FAILED


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


def _list_command(args: argparse.Namespace) -> int:
    scenarios = _load("list", args.paths or [DEFAULT_PATH])
    if scenarios is None:
        return EXIT_USAGE
    table = Table(header_style="bold")
    for column in ("scenario", "nodes", "faults", "field failure", "backends", "file"):
        table.add_column(column, justify="right" if column == "nodes" else "left")
    for sc in scenarios:
        backends = ", ".join([sc.backend, *(b for b in sc.backends if b != sc.backend)])
        row = (sc.name, str(sc.nodes), _fault_names(sc), sc.field_failure or "-", backends)
        table.add_row(*row, sc.path)
    out = _console()
    out.print(table)
    out.print(f"{len(scenarios)} scenario(s)")
    return EXIT_PASSED
