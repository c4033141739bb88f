"""``harness run``: load scenario files, run them, report.

``run`` checks that the ``--junit``/``--html`` destinations can be written and loads
every scenario first (invalid files stop everything with exit status 2, naming every bad
file and its bad keys), starts the embedded Toxiproxy-API server unless ``--toxiproxy``
names a real one, runs the scenarios ``-j`` at a time, shows progress (a rich progress bar
on a terminal; otherwise one plain line as each scenario starts and one as it ends, so CI
logs stay readable), prints the summary, writes the JUnit and HTML reports when asked, and
exits 1 when any scenario failed, 2 when nothing ran (every scenario skipped), 130 on
Ctrl-C (the running scenarios are stopped at once and shown as interrupted), 0 otherwise.
The argument types, exit statuses and loading it shares with the other commands are
:mod:`harness.cli.common`'s.
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
from rich.text import Text

from harness.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    EXIT_USAGE,
    backend_arg,
    data_console,
    jobs_arg,
    load_scenarios,
    nothing_ran,
    pack_arg,
    parse_address,
    report_file,
)
from harness.errors import HarnessError
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
from harness.scenario.model import WORLDS, Scenario

__all__ = ["add_commands"]


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
        help="run every scenario on this backend: static (rdzv), torch-static, "
        "torch-c10d or module:factory (default: each file's own); [backends.NAME] in a "
        "file records how that backend differs",
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
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show what every node said and did (outcome, events with their messages, "
        "output), for passing runs too",
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
    except WorldUnreachable as exc:
        print(f"harness run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except HarnessError as exc:  # the proxy server could not start or be reached
        where = "--toxiproxy" if args.toxiproxy else "the embedded toxiproxy"
        print(f"harness run: {where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    wall = time.monotonic() - began
    print_summary(reports, out, wall, verbose=args.verbose)
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
