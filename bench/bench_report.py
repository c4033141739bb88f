"""Reports at scale: render time and size of the console, JUnit and HTML reports of
realistic 256-, 1024- and 4096-node runs, and how long headless Chromium takes to load and
draw the HTML page (collapsed as it opens, and with every band expanded).

The reports are the renderer tests' samples (``tests/harness/report_samples.py``): every
node has its ~9 events and an outcome, a latency toxic on every link, a straggler, a
handful of nodes killed (``scale``); everyone timing out naming the straggler, a failing
run with one violation per node (``straggler``). Goals: the 4096-node HTML page under 5 MB.

Usage: ``python bench/bench_report.py [--nodes 256 1024 4096] [--repeat 3] [--no-browser]``
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from harness.report.console import print_summary
from harness.report.html import render_html
from harness.report.junit import junit_xml
from harness.run.model import Report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "harness"))
from report_samples import scale_report, straggler_report  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def chromium_seconds(page: Path, repeat: int) -> float:
    """Median wall time of a headless Chromium that loads ``page`` and writes a screenshot."""
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
            command = [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp}/profile",
                f"--screenshot={tmp}/shot.png",
                "--window-size=1400,1000",
                page.as_uri(),
            ]
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, timeout=300, check=True)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def console_text(report: Report) -> str:
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    print_summary([report], console, wall=1.0)
    return console.export_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    browser = not args.no_browser and CHROMIUM.exists()
    header = f"{'report':<16}{'render_html':>12}{'HTML MB':>9}{'console lines':>15}{'JUnit KB':>10}"
    if browser:
        header += f"{'Chromium s':>12}{'all open s':>12}"
    print(header)
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        if browser:
            blank = work / "blank.html"
            blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>", encoding="utf-8")
            print(f"(a blank page takes Chromium {chromium_seconds(blank, args.repeat):.2f} s)")
        for n in args.nodes:
            for name, make in (("scale", scale_report), ("straggler", straggler_report)):
                report = make(n)
                seconds, html = timed(lambda r=report: render_html([r]), args.repeat)
                assert isinstance(html, str)
                lines = len(console_text(report).splitlines())
                junit = len(ET.tostring(junit_xml([report]).getroot()))
                row = f"{f'{name}-{n}':<16}{seconds:>11.2f}s{len(html.encode()) / 1e6:>9.2f}"
                row += f"{lines:>15}{junit / 1e3:>10.1f}"
                if browser:
                    page, expanded = work / f"{name}-{n}.html", work / f"{name}-{n}-open.html"
                    page.write_text(html, encoding="utf-8")
                    opened = html.replace('<details class="band">', '<details class="band" open>')
                    expanded.write_text(opened, encoding="utf-8")
                    row += f"{chromium_seconds(page, args.repeat):>12.2f}"
                    row += f"{chromium_seconds(expanded, args.repeat):>12.2f}"
                print(row, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
