"""``harness run`` and ``harness list``, run as real processes on small scenario files."""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import harness

from harness.cli import build_parser
from harness.cli_run import parse_address
from harness.toxiproxy_api import ToxiproxyServer

HAPPY = """\
name = "tiny-happy"
description = "Three nodes rendezvous through their proxy links."
seed = 11
nodes = 3

[timeouts]
join = 10
"""

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
    assert re.search(r"^\[1/1\] PASS tiny-happy  3 nodes  seed 11  .* \[3 ok\]$", done.stdout, re.M)
    assert re.search(r"│ tiny-happy\s+│\s+11 │\s+3 │ 3 ok\s+│", done.stdout)
    assert "1 passed, 0 failed, 0 errors in" in done.stdout


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
    assert "fault[0].type: got 'latencyy'; allowed:" in done.stderr
    assert "PASS" not in done.stdout  # nothing ran


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
    assert "harness run: --toxiproxy:" in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr


def test_list_prints_name_nodes_faults_field_failure_and_file(tmp_path: Path) -> None:
    suite = write(tmp_path / "suite", faulty=FAULTY, happy=HAPPY)
    done = harness("list", str(suite), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if "tiny-faults" in line)
    assert re.search(r"tiny-faults\s+│\s+4 │ toxic latency, pause\s+│ F28\s+│ .*faulty\.toml", row)
    assert re.search(r"tiny-happy\s+│\s+3 │ -\s+│ -\s+│", done.stdout)
    assert "2 scenario(s)" in done.stdout


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
    assert "-j takes a whole number of at least 1, got '0'" in capsys.readouterr().err
