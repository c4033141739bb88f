"""``harness fuzz`` and ``harness replay``.

``fuzz`` runs random scenarios (see :mod:`harness.fuzz.loop`), one plain progress line per run,
and exits 1 when it wrote a shrunk failing scenario, 0 when nothing failed, 2 on a usage
error or when nothing could run (``--world netns`` without root). ``replay`` re-runs one
scenario file with its recorded seed and exits like ``harness run``: 0 passed, 1 failed,
2 invalid file (or no seed) or nothing ran (its backend cannot run here), 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import secrets
import sys
from pathlib import Path

from harness.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    EXIT_USAGE,
    at_least_one,
    backend_arg,
    data_console,
    nothing_ran,
    print_invalid,
    report_file,
    say,
)
from harness.errors import ScenarioError

__all__ = ["add_commands"]

DEFAULT_BUDGET = 20
DEFAULT_OUT = "fuzz-failures"
#: The worlds ``harness fuzz --world`` draws scenarios for (those whose capabilities are known
#: before a run: :func:`harness.run.worlds.capabilities_of`).
FUZZ_WORLDS = ("local", "netns")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fuzz`` and ``replay`` to the top-level subparsers."""
    fuzzing = commands.add_parser(
        "fuzz",
        help="run random scenarios; shrink and write the first failing one",
        description="Run random scenarios on real nodes; on a failure hypothesis shrinks it "
        "and the minimal failing scenario is written as a TOML file that `harness run` "
        "reproduces. Exit status 1 when a failing scenario was written, 0 when none failed.",
    )
    fuzzing.add_argument(
        "--budget",
        type=at_least_one("--budget"),
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"scenarios to generate (default {DEFAULT_BUDGET}; shrinking runs more)",
    )
    fuzzing.add_argument("--seed", type=int, help="seed for hypothesis (default: random)")
    fuzzing.add_argument(
        "--out",
        type=Path,
        default=Path(DEFAULT_OUT),
        metavar="DIR",
        help=f"where the failing scenario is written (default {DEFAULT_OUT}/)",
    )
    fuzzing.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="also write every drawn scenario that ran (passing ones too) to DIR, as a "
        "scenario file with its seed that `harness run` runs again",
    )
    fuzzing.add_argument(
        "--backend",
        type=backend_arg,
        metavar="B",
        help="backend of every scenario: static (default), torch-static, torch-c10d or "
        "module:factory; "
        "the oracle states rdzv's semantics, so on another backend the search finds where "
        "that backend differs",
    )
    fuzzing.add_argument(
        "--world",
        choices=FUZZ_WORLDS,
        help="the world every scenario runs in: local (default; faults through the proxy) or "
        "netns (a network namespace per node, needs root and nft; the kernel faults drop, "
        "reject, partition, loss, filter and bandwidth besides the proxy's); only the fault "
        "kinds the world can carry out are drawn",
    )
    fuzzing.add_argument(
        "--kinds",
        type=kind_list,
        metavar="K[,K...]",
        help="draw only these fault kinds (e.g. absent,kill,latency; default: every kind the "
        "world can carry out); scenarios then carry no misconfigured node either",
    )
    fuzzing.set_defaults(func=_fuzz_command)
    replaying = commands.add_parser(
        "replay",
        help="re-run a scenario file with its recorded seed",
        description="Re-run one scenario file with the seed recorded in it (or --seed), on "
        "a proxy seeded the same way; exit status like `harness run`.",
    )
    replaying.add_argument("file", type=Path, metavar="FILE", help="the scenario file")
    replaying.add_argument("--seed", type=int, help="use this seed instead of the recorded one")
    replaying.add_argument(
        "--html", type=report_file, metavar="FILE", help="write an HTML timeline report"
    )
    replaying.set_defaults(func=_replay_command)


def kind_list(text: str) -> frozenset[str]:
    """``--kinds``: comma-separated registered fault kinds."""
    from harness.scenario.faults.registry import FAULTS

    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    if (what := FAULTS.unknown(names)) is not None:
        raise argparse.ArgumentTypeError(f"{what} in {text!r}; the kinds are: {FAULTS.listing()}")
    return names


def _fuzz_command(args: argparse.Namespace) -> int:
    from harness.fuzz.loop import fuzz  # hypothesis is imported only when fuzzing
    from harness.fuzz.strategies import kinds_for

    if args.kinds is not None:
        try:
            kinds_for(args.world or "local", args.kinds)
        except ValueError as exc:
            print(f"harness fuzz: --kinds: {exc}", file=sys.stderr)
            return EXIT_USAGE

    seed = args.seed if args.seed is not None else secrets.randbits(32)
    in_world = f", world {args.world}" if args.world is not None else ""
    say(f"harness fuzz: seed {seed}, budget {args.budget}{in_world}")
    try:
        result = fuzz(
            args.budget,
            seed,
            args.out,
            say,
            args.backend,
            world=args.world,
            keep=args.keep,
            kinds=args.kinds,
        )
    except KeyboardInterrupt:
        print("harness fuzz: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        where = f"--out {args.out}" + (f" or --keep {args.keep}" if args.keep else "")
        print(f"harness fuzz: cannot write to {where}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if result.skipped is not None and not result.examples:
        return EXIT_USAGE  # nothing ran (the last line says why)
    return EXIT_FAILED if result.written else EXIT_PASSED


def _replay_command(args: argparse.Namespace) -> int:
    from harness.fuzz.loop import replay
    from harness.report.console import print_summary
    from harness.report.html import write_html

    out = data_console()
    try:
        report = replay(args.file, args.seed)
    except ScenarioError as exc:
        print_invalid("replay", exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("harness replay: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    print_summary([report], out, report.duration, title="harness replay")
    if args.html is not None:
        now = dt.datetime.now(dt.UTC)
        try:
            write_html([report], args.html, generated=f"{now:%Y-%m-%d %H:%M:%S} UTC")
        except OSError as exc:
            print(
                f"harness replay: cannot write the HTML report to {args.html}: {exc}",
                file=sys.stderr,
            )
            return EXIT_USAGE
    why_not = nothing_ran([report])
    if why_not is not None:
        print(f"harness replay: {args.file}: {why_not}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_PASSED if report.passed else EXIT_FAILED
