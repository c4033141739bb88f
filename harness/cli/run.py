"""``harness run``: load scenario files, run them, report (and what ``list`` shares).

``run`` checks that the ``--junit``/``--html`` destinations can be written and loads
every scenario first (invalid files stop everything with exit status 2, naming every bad
file and its bad keys), starts the embedded Toxiproxy-API server unless ``--toxiproxy``
names a real one, runs the scenarios ``-j`` at a time, shows progress (a rich progress bar
on a terminal; otherwise one plain line as each scenario starts and one as it ends, so CI
logs stay readable), prints the summary, writes the JUnit and HTML reports when asked, and
exits 1 when any scenario failed, 2 when nothing ran (every scenario skipped), 130 on
Ctrl-C (the running scenarios are stopped at once and shown as interrupted), 0 otherwise.

Everything read from files is data: it is printed literally (rich markup and ``:emoji:``
codes are off on these consoles).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from harness.errors import HarnessError, InvalidScenariosError, ScenarioError, UnsupportedError
from harness.proxy.address import parse_api_address
from harness.proxy.client import ToxiproxyClient
from harness.report.console import print_summary
from harness.report.html import write_html
from harness.report.junit import write_junit
from harness.report.text import result_line
from harness.run.model import Report
from harness.run.suite import (
    ProxyProvider,
    SuiteInterrupted,
    WorldUnreachable,
    embedded_proxy,
    run_suite,
    shared_proxy,
    worlds_session,
)
from harness.scenario.load import load_many
from harness.scenario.model import WORLDS, Scenario, backend_name

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "EXIT_USAGE",
    "add_commands",
    "at_least_one",
    "backend_arg",
    "data_console",
    "jobs_arg",
    "load_scenarios",
    "nothing_ran",
    "pack_arg",
    "parse_address",
    "print_invalid",
    "report_file",
]

#: Exit statuses: every scenario passed / some failed / the command could not run or
#: nothing ran / interrupted (Ctrl-C).
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


def jobs_arg(text: str) -> int | Literal["auto"]:
    """argparse type of ``-j``: ``auto`` or a whole number of at least 1."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"-j takes auto or a whole number of at least 1, got {text!r}"
        )
    return value


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


def pack_arg(text: str) -> int:
    """argparse type of ``--pack``: a whole number of at least 2, else a usage error."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"--pack takes a whole number of nodes per process of at least 2, got {text!r}"
        )
    return value


def backend_arg(text: str) -> str:
    """argparse type of ``--backend``: a backend name, else a usage error."""
    try:
        return backend_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def report_file(text: str) -> Path:
    """argparse type of ``--junit``/``--html``: a file this process can write, checked before
    anything runs (a directory, a missing directory or one it cannot write in is a usage
    error). The check creates the file if it did not exist, then removes it again.

    Raises:
        argparse.ArgumentTypeError: ``text`` names a directory, sits in a directory that
            does not exist, or cannot be opened for writing (the reason is given).
    """
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name in it")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: directory {str(parent)!r} {what}")
    existed = path.exists()
    try:
        with open(path, "ab" if existed else "xb"):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {reason}") from exc
    if not existed:
        path.unlink()
    return path


def data_console() -> Console:
    """A console for output made of data (names, paths, messages): no markup, no emoji
    codes, no highlighting, so every character is printed as it is. On a terminal (or with
    ``COLUMNS`` set) it is as wide as that says; else 160 columns, for CI logs."""
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(highlight=False, markup=False, emoji=False, width=None if wide else 160)


def print_invalid(command: str, exc: ScenarioError) -> None:
    """Name every bad file of ``exc`` and each of its problems on stderr."""
    errors = exc.errors if isinstance(exc, InvalidScenariosError) else (exc,)
    for error in errors:
        problems = "\n".join(f"  - {p}" for p in error.problems)
        print(f"harness {command}: invalid scenario {error.source}:\n{problems}", file=sys.stderr)
    if isinstance(exc, InvalidScenariosError) and len(errors) > 1:
        outcome = "nothing listed" if command == "list" else "nothing ran"
        print(
            f"harness {command}: {len(errors)} scenario paths are invalid; {outcome}",
            file=sys.stderr,
        )


def nothing_ran(reports: Sequence[Report]) -> str | None:
    """Why a run in which no scenario ran (every one skipped) is not a success, else None."""
    if not reports or any(r.skipped is None for r in reports):
        return None
    reasons = sorted({f"on {r.scenario.backend}: {r.skipped}" for r in reports})
    return "nothing ran: every scenario was skipped (" + "; ".join(reasons) + ")"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run`` to the top-level subparsers."""
    run = commands.add_parser(
        "run",
        help="run scenario files and judge them",
        description="Run scenario files (or every *.toml below a directory) and judge them; "
        "exit status 1 when any scenario fails, 2 when a file is invalid or nothing ran "
        "(every scenario skipped), 130 when interrupted.",
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    run.add_argument("--seed", type=int, help="seed every scenario with N (default: its own)")
    run.add_argument(
        "-j",
        "--jobs",
        type=jobs_arg,
        default="auto",
        metavar="N",
        help="scenarios at once, at most: a whole number, or auto (the default: one per "
        "core); a scenario starts only when its nodes fit beside the running ones in what "
        "the machine holds (512 nodes per core), so heavy ones run alone",
    )
    run.add_argument(
        "--backend",
        type=backend_arg,
        metavar="NAME",
        help="run every scenario on this backend: static (rdzv), torch-static or "
        "module:factory (default: each file's own); [backends.NAME] in a file records "
        "how that backend differs",
    )
    run.add_argument(
        "--pack",
        type=pack_arg,
        metavar="K",
        help="run K nodes per process as threads (node 0 stays a process of its own; kill "
        "and pause of a packed node are emulated, see docs/scenarios.md); overrides each "
        "file's pack key",
    )
    run.add_argument(
        "--world",
        choices=WORLDS,
        help="run every scenario in this world: local (processes on this machine, links "
        "through the fault proxy), netns (each node in a network namespace of its own, "
        "faults in the kernel; needs root and nft) or ray (Ray actors; see docs/cluster.md); "
        "overrides each file's world key",
    )
    run.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster of the ray world (what `ray start --head` printed, or auto); "
        "default: a local Ray bound to 127.0.0.1, started once for the whole run",
    )
    run.add_argument("--junit", type=report_file, metavar="FILE", help="write a JUnit XML report")
    run.add_argument(
        "--html", type=report_file, metavar="FILE", help="write an HTML timeline report"
    )
    run.add_argument(
        "--toxiproxy",
        type=parse_address,
        metavar="HOST:PORT",
        help="use this real Toxiproxy server instead of the embedded one",
    )
    run.set_defaults(func=_run_command)


def load_scenarios(command: str, paths: Sequence[str]) -> list[Scenario] | None:
    """The scenarios of ``paths``, or None after saying on stderr why there are none (bad
    files, each with its problems; no ``*.toml`` under a path)."""
    try:
        scenarios = load_many(paths)
    except ScenarioError as exc:
        print_invalid(command, exc)
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

        def started(scenario: Scenario) -> None:
            out.print(f"START {scenario.name}  {scenario.nodes} nodes", soft_wrap=True)

        def line(report: Report) -> None:
            nonlocal done
            done += 1
            out.print(result_line(report, done, total), soft_wrap=True)

        return run_suite(scenarios, proxies, args.jobs, args.seed, line, started)
    running: list[str] = []
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}", style="bold", markup=False),
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
            progress.console.print(Text(result_line(report), style=style), soft_wrap=True)
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
    scenarios = load_scenarios("run", args.paths)
    if scenarios is None:
        return EXIT_USAGE
    if args.backend is not None:
        scenarios = [sc.on_backend(args.backend) for sc in scenarios]
    if args.pack is not None:
        scenarios = [sc.packed(args.pack) for sc in scenarios]
    if args.world is not None:
        scenarios = [sc.in_world(args.world) for sc in scenarios]
    out = data_console()
    now = dt.datetime.now(dt.UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S")  # the JUnit schema's form (no zone)
    began = time.monotonic()
    interrupted = False
    try:
        with worlds_session(scenarios, args.ray_address):
            reports = _progress_run(scenarios, _proxies(args.toxiproxy), args, out)
    except SuiteInterrupted as exc:
        reports, interrupted = exc.reports, True
    except KeyboardInterrupt:  # before any scenario started
        print("harness run: interrupted (Ctrl-C) before any scenario started", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UnsupportedError as exc:  # the ray world without Ray installed
        print(f"harness run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WorldUnreachable as exc:
        print(f"harness run: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
    if interrupted:
        stopped = sum(r.interrupted for r in reports)
        never = len(scenarios) - len(reports)
        print(
            f"harness run: interrupted (Ctrl-C): {stopped} running scenario(s) stopped (nodes "
            f"killed, proxies removed), {never} never started",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if not written:
        return EXIT_USAGE
    why_not = nothing_ran(reports)
    if why_not is not None:
        print(f"harness run: {why_not}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_PASSED if all(r.passed for r in reports) else EXIT_FAILED
