"""``harness run`` and ``harness list``, run as real processes on small scenario files."""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from cli_helpers import HAPPY, harness, harness_on_terminal, harness_process, harness_script
from waiting_backend import READY_PORT

from harness.cli import build_parser
from harness.cli.common import parse_address, report_file
from harness.cli.listing import runs_on
from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.scenario.load import load_many

ROOT = Path(__file__).resolve().parents[2]

# Every node succeeds, but the file expects timeouts: the run must be judged a failure.
WRONG = """\
name = "tiny-wrong-expectation"
description = "Expects timeouts from a healthy rendezvous, so the checks fail."
seed = 12
nodes = 3

[timeouts]
join = 10

[expect]
outcome = "timeout"
"""

FAULTY = """\
name = "tiny-faults"
description = "Only listed, never run."
field_failure = "F28"
nodes = 4

[[fault]]
kind = "toxic"
nodes = [3]
type = "latency"
attributes = { latency = 100 }

[[fault]]
kind = "pause"
nodes = [2]
at = 1.0
duration = 1.0
"""

INVALID = """\
name = "tiny-invalid"
description = "A bad fault type."
nodes = 2

[[fault]]
kind = "toxic"
type = "latencyy"
"""


# Nodes that report in over a socket, then wait until they are killed: a run to interrupt.
FOREVER = """\
name = "waits-forever"
description = "Every node says it runs, then waits until it is killed."
seed = 13
nodes = 3
backend = "waiting_backend:waiting"

[timeouts]
join = 300

# in place from the start, but the nodes never send through their links: when the run is
# interrupted it has not acted, because it was not reached, not because it missed
[[fault]]
kind = "toxic"
nodes = [1]
type = "latency"
attributes = { latency = 100 }
"""

ELSEWHERE = """\
name = "backend-elsewhere"
description = "Its backend's module is not importable here, so it never runs."
seed = 14
nodes = 2
backend = "nomod:factory"
"""


def write(directory: Path, **files: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / f"{name}.toml").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def embedded() -> Iterator[ToxiproxyServer]:
    with ToxiproxyServer(seed=5) as server:
        yield server


def test_run_exits_0_with_one_line_per_scenario_and_a_summary_when_all_pass(
    tmp_path: Path,
) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY)
    done = harness("run", str(suite), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    line = r"^\[1/1\] PASS tiny-happy  3 nodes  seed 11  .* \[3 ok\]  "
    line += r"\(started in .* s, release skew .* s\)$"
    assert re.search(line, done.stdout, re.M)
    assert re.search(r"│ tiny-happy\s+│\s+11 │\s+3 │ 3 ok\s+│", done.stdout)
    assert "1 passed, 0 failed, 0 errors in" in done.stdout


def test_run_verbose_shows_what_each_node_said_for_a_passing_run(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY)
    quiet = harness("run", str(suite), cwd=tmp_path)
    done = harness("run", "-v", str(suite), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node 2 events:" not in quiet.stdout
    assert "PASS tiny-happy (seed 11)" in done.stdout
    for node in range(3):
        assert f"node {node}: ok, rank {node}, world size 3, after " in done.stdout
        assert f"node {node} events:" in done.stdout
    assert re.search(r"│\s+\d+\.\d{3} s joined\s", done.stdout)
    assert "exit_wait: waiting for rank" in done.stdout  # an event's own message


def test_run_exits_1_and_writes_junit_and_html_when_a_scenario_fails(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY, wrong=WRONG)
    junit, html = tmp_path / "out" / "junit.xml", tmp_path / "report.html"
    (tmp_path / "out").mkdir()
    done = harness(
        "run", str(suite), "-j", "2", "--seed", "4242", "--junit", str(junit), "--html", str(html),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    replay = f"harness run {suite / 'wrong.toml'} --seed 4242"
    assert "FAIL tiny-wrong-expectation  3 nodes  seed 4242" in done.stdout
    assert f"(3 violation(s); replay: {replay})" in done.stdout
    assert "[outcome] node 0 ended 'ok', expected 'timeout'" in done.stdout
    assert "1 passed, 1 failed, 0 errors" in done.stdout
    suite_xml = ET.parse(junit).getroot().find("testsuite")
    assert suite_xml is not None
    assert (suite_xml.get("tests"), suite_xml.get("failures")) == ("2", "1")
    cases = {c.get("name"): c for c in suite_xml.iter("testcase")}
    assert cases["tiny-happy"].find("failure") is None
    failure = cases["tiny-wrong-expectation"].find("failure")
    assert failure is not None and failure.text is not None
    assert "seed: 4242" in failure.text and f"replay: {replay}" in failure.text
    page = html.read_text(encoding="utf-8")
    assert "<h2>tiny-happy</h2>" in page and "<h2>tiny-wrong-expectation</h2>" in page
    assert len(re.findall(r'<g class="lane" data-nodes="\d+"', page)) == 6


def test_run_exits_2_naming_the_file_and_key_of_an_invalid_scenario(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY, invalid=INVALID)
    done = harness("run", str(suite), cwd=tmp_path)
    assert done.returncode == 2
    assert f"harness run: invalid scenario {suite / 'invalid.toml'}:" in done.stderr
    assert "fault[0].type: got 'latencyy'; did you mean 'latency'? allowed:" in done.stderr
    assert "PASS" not in done.stdout  # nothing ran


def test_run_names_every_invalid_file_of_a_directory_and_runs_nothing(tmp_path: Path) -> None:
    bad_nodes = HAPPY.replace("nodes = 3", 'nodes = "three"').replace("tiny-happy", "tiny-2")
    suite = write(tmp_path / "suite", a=INVALID, b=HAPPY, c=bad_nodes)
    done = harness("run", str(suite), cwd=tmp_path)
    assert done.returncode == 2
    assert f"harness run: invalid scenario {suite / 'a.toml'}:" in done.stderr
    assert (
        "  - fault[0].type: got 'latencyy'; did you mean 'latency'? allowed: 'latency', "
        in done.stderr
    )
    assert f"harness run: invalid scenario {suite / 'c.toml'}:" in done.stderr
    assert "  - nodes: got 'three'; must be a whole number" in done.stderr
    assert "harness run: 2 scenario paths are invalid; nothing ran" in done.stderr
    assert "START" not in done.stdout


def test_list_names_every_invalid_file(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", a=INVALID, b=INVALID.replace('type = "latencyy"', ""))
    done = harness("list", str(suite), cwd=tmp_path)
    assert done.returncode == 2
    assert f"invalid scenario {suite / 'a.toml'}:\n  - fault[0].type: got 'latencyy'" in done.stderr
    assert f"invalid scenario {suite / 'b.toml'}:\n  - fault[0].type: required key" in done.stderr


def test_run_exits_2_when_a_path_holds_no_scenario(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = harness("run", str(tmp_path / "empty"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no scenario files (*.toml) in" in done.stderr


def test_run_drives_the_toxiproxy_server_named_by_the_toxiproxy_option(
    tmp_path: Path, embedded: ToxiproxyServer
) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY)
    done = harness(
        "run", str(suite), "--toxiproxy", f"{embedded.host}:{embedded.port}", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(e.proxy.startswith("tiny-happy") for e in embedded.events())


def test_run_exits_2_when_nothing_answers_at_the_toxiproxy_address(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY)
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        done = harness("run", str(suite), "--toxiproxy", f"127.0.0.1:{port}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"harness run: --toxiproxy: cannot reach toxiproxy at http://127.0.0.1:{port} for "
        "GET /version: connection refused; is the server running there?\n"
    )  # one line: what was tried and what happened, none of urllib3's wrapping


def test_list_piped_prints_one_tab_separated_line_per_scenario_and_nothing_else(
    tmp_path: Path,
) -> None:
    suite = write(tmp_path / "suite", faulty=FAULTY, happy=HAPPY)
    done = harness("list", str(suite), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    faulty = str(suite / "faulty.toml")
    named = "static, torch-static, torch-c10d"
    assert done.stdout.splitlines() == [
        "\t".join(("tiny-faults", "4", "toxic latency, pause", "F28", named, faulty)),
        "\t".join(("tiny-happy", "3", "-", "-", named, str(suite / "happy.toml"))),
    ]


def test_list_on_a_terminal_is_a_table_that_fits_its_width(tmp_path: Path) -> None:
    write(tmp_path / "suite", faulty=FAULTY, happy=HAPPY)
    for columns in (200, 100, 72):
        status, shown, err = harness_on_terminal("list", "suite", cwd=tmp_path, columns=columns)
        assert status == 0, err
        assert max(len(line) for line in shown.splitlines()) <= columns
        assert "│" in shown  # still a table, its cells wrapped
        assert "2 scenario(s)" in shown
        assert "field failures (F..) are described in docs/field-failures.md" in shown
    status, shown, _ = harness_on_terminal("list", "suite", cwd=tmp_path, columns=200)
    row = next(line for line in shown.splitlines() if "tiny-faults" in line)
    assert re.search(r"tiny-faults\s+│\s+4 │ toxic latency, pause\s+│ F28\s+│ .*faulty\.toml", row)


def test_list_names_the_backends_each_shipped_scenario_runs_on() -> None:
    by_name = {sc.name: sc for sc in load_many([str(ROOT / "scenarios")])}
    # the file marks both torch backends unsupported: it does not run there
    assert runs_on(by_name["f01-master-name-never-resolves"]) == ["static"]
    # nothing recorded for torch: it runs there with the same expectations
    every = ["static", "torch-static", "torch-c10d"]
    assert runs_on(by_name["f02-server-binds-late"]) == every
    # recorded differences are still a backend it runs on
    assert runs_on(by_name["f03-node-never-arrives"]) == every


def test_list_outside_the_repository_says_where_it_looked_and_what_to_do(
    tmp_path: Path,
) -> None:
    done = harness("list", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"harness list: no scenarios/ directory in {tmp_path}; run it from the repository's "
        "top directory, or name scenario files or directories: harness list PATH...\n"
    )


def test_list_of_invalid_files_ends_saying_nothing_was_listed(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", a=INVALID, b=INVALID)
    done = harness("list", str(suite), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[-1] == "harness list: 2 scenario paths are invalid; nothing listed"
    )


def test_list_defaults_to_the_scenarios_directory(tmp_path: Path) -> None:
    write(tmp_path / "scenarios", happy=HAPPY)
    done = harness("list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "tiny-happy" in done.stdout
    write(tmp_path / "scenarios", invalid=INVALID)
    assert harness("list", cwd=tmp_path).returncode == 2


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:8474", ("127.0.0.1", 8474)),
        ("[::1]:8474", ("::1", 8474)),
        ("http://toxiproxy:8474", ("toxiproxy", 8474)),
    ],
)
def test_toxiproxy_address_accepts_host_port_forms(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["8474", "host", "host:99999", "ftp://host:1", "host:1/path"])
def test_the_command_line_rejects_a_bad_toxiproxy_address_or_job_count(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["run", "x", "--toxiproxy", text])
    assert exit_info.value.code == 2
    assert "is not HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "x", "-j", "0"])
    assert "-j takes auto or a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_a_run_in_which_every_scenario_was_skipped_is_not_a_success(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", elsewhere=ELSEWHERE)
    done = harness("run", str(suite), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert re.search(
        r"harness run: nothing ran: every scenario was skipped \(on nomod:factory: no module "
        r"named 'nomod'",
        done.stderr,
    )
    assert "0 passed, 0 failed, 0 errors, 1 skipped" in done.stdout


def test_replay_of_a_file_whose_backend_cannot_run_here_is_not_a_success(tmp_path: Path) -> None:
    write(tmp_path, elsewhere=ELSEWHERE)
    done = harness("replay", "elsewhere.toml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "harness replay: elsewhere.toml: nothing ran: every scenario was skipped" in done.stderr


def test_text_from_files_is_printed_literally_never_as_markup_or_emoji(tmp_path: Path) -> None:
    # rich used to turn ":factory:" (a backend module:factory followed by a colon) into 🏭
    # and "[bold]" in a path into a style
    suite = write(tmp_path / "[bold]odd[/bold] :smile: dir", elsewhere=ELSEWHERE)
    ran = harness("run", str(suite), cwd=tmp_path)
    assert "not run on nomod:factory: no module named 'nomod'" in ran.stdout, ran.stdout
    listed = harness("list", str(suite), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "[bold]odd[/bold] :smile: dir/elsewhere.toml" in listed.stdout
    assert "nomod:factory" in listed.stdout
    for text in (ran.stdout, ran.stderr, listed.stdout):
        assert "\N{FACTORY}" not in text and "\N{SMILING FACE WITH OPEN MOUTH}" not in text


def test_list_never_truncates_names_or_paths_on_a_narrow_terminal(tmp_path: Path) -> None:
    name = "a-scenario-name-much-longer-than-a-forty-column-terminal"
    deep = tmp_path / "a-directory-with-a-long-name" / "and-another-one-below-it"
    write(deep, long_named_scenario_file=FAULTY.replace("tiny-faults", name))
    status, shown, err = harness_on_terminal("list", str(deep), cwd=tmp_path, columns=40)
    assert status == 0, err
    lines = shown.splitlines()
    assert name in lines
    path = deep / "long_named_scenario_file.toml"
    assert f"  file: {path}" in lines
    assert "  faults: toxic latency, pause" in lines
    assert "\N{HORIZONTAL ELLIPSIS}" not in shown
    piped = harness("list", str(deep), cwd=tmp_path, columns=40)
    assert piped.stdout.split("\t")[0] == name
    assert piped.stdout.rstrip("\n").split("\t")[-1] == str(path)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("out", r"'out' is a directory; give a file name in it"),
        ("missing/report.xml", r"cannot write 'missing/report\.xml': directory 'missing' does not"),
    ],
)
def test_a_report_destination_is_checked_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, message: str
) -> None:
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        report_file(where)
    assert report_file("out/junit.xml") == Path("out/junit.xml")
    assert not (tmp_path / "out" / "junit.xml").exists()  # checked, not left behind


@pytest.mark.parametrize("option", ["--junit", "--html"])
def test_run_with_an_unwritable_report_exits_2_before_any_scenario_starts(
    tmp_path: Path, option: str
) -> None:
    suite = write(tmp_path / "suite", happy=HAPPY)
    done = harness("run", str(suite), option, str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert f"argument {option}: '{tmp_path}' is a directory" in done.stderr
    assert "START" not in done.stdout and "PASS" not in done.stdout


def test_ctrl_c_stops_the_run_at_once_kills_every_node_and_says_interrupted(
    tmp_path: Path, embedded: ToxiproxyServer
) -> None:
    suite = write(tmp_path / "suite", a_forever=FOREVER, b_happy=HAPPY)
    junit = tmp_path / "junit.xml"
    address = f"{embedded.host}:{embedded.port}"
    with contextlib.ExitStack() as stack:
        ready = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        ready.settimeout(120)
        env = {READY_PORT: str(ready.getsockname()[1])}
        # -j 1: the second scenario is still waiting its turn when Ctrl-C comes
        command = ("run", str(suite), "-j", "1", "--junit", str(junit), "--toxiproxy", address)
        with harness_process(*command, cwd=tmp_path, env=env) as run:
            assert run.line("START ").startswith("START waits-forever  3 nodes")
            nodes = []
            for _ in range(3):  # every node is running once it has reported in (and it
                conn = stack.enter_context(ready.accept()[0])  # waits while this is open)
                nodes.append(int(conn.makefile().readline().split()[1]))
            family = psutil.Process(run.proc.pid).children(recursive=True)
            assert set(nodes) <= {p.pid for p in family}
            run.proc.send_signal(signal.SIGINT)
            status, out, err = run.finish()
    assert status == 130, out + err
    assert "harness run: interrupted (Ctrl-C): 1 running scenario(s) stopped" in err
    assert "1 never started" in err
    assert re.search(r"^\[1/2\] INTERRUPTED waits-forever .*\[3 interrupted\]", out, re.M)
    assert "0 passed, 0 failed, 0 errors, 1 interrupted" in out
    assert not re.search(r"\bPASS\b", out)
    assert "did not act" not in out + err
    assert re.search(
        r"fault 0 toxic on nodes 1 from [\d.]+ s to the end: latency .*; not reached: the run "
        r"was interrupted before it acted",
        out,
    ), out
    _, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"left running: {alive}"
    assert ToxiproxyClient(embedded.host, embedded.port).proxies() == {}
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert list(cases) == ["waits-forever"]
    error = cases["waits-forever"].find("error")
    assert error is not None and error.get("type") == "Interrupted"
    assert "interrupted (Ctrl-C)" in (error.get("message") or "")


def test_ctrl_c_taken_by_a_worker_thread_still_stops_the_run(tmp_path: Path) -> None:
    # A process-directed SIGINT may be taken by any thread: Python raises KeyboardInterrupt
    # in the main thread only once it wakes, so the suite must not sleep on its scenarios.
    scenario = tmp_path / "forever.toml"
    scenario.write_text(FOREVER)
    driver = Path(__file__).with_name("interrupt_driver.py")
    with harness_script(driver, str(scenario), "3", cwd=tmp_path) as run:
        status, out, err = run.finish(timeout=120)
    assert status == 130, out + err
    assert out.strip() == "INTERRUPTED 1 True"
