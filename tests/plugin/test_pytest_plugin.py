"""The pytest plugin, exercised by running pytest in a subprocess on a scratch project."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PASSING = """
name = "two-nodes-join"
description = "Two nodes join; both get ranks."
seed = 11
nodes = 2

[timeouts]
join = 10
"""

# Node 1 never starts, yet every node is expected to succeed: the run must fail.
FAILING = """
name = "expects-too-much"
description = "Node 1 is absent but the file expects success."
seed = 7
nodes = 2

[timeouts]
join = 1

[[fault]]
kind = "absent"
nodes = [1]
"""

INVALID = """
name = "bad-keys"
description = "Has a key the format does not know."
nodes = 2
colour = "blue"
"""

UNRELATED = """
import sys

def test_plugin_imported_nothing_heavy():
    heavy = {"harness.run", "harness.scenario", "aiohttp", "multiprocess", "pydantic"}
    assert not heavy & set(sys.modules), sorted(heavy & set(sys.modules))
"""

FIXTURES = """
import pytest

from harness.errors import ScenarioError
from rdzv import TCPStore

def test_rdzv_store_is_live(rdzv_store):
    worker = TCPStore("127.0.0.1", rdzv_store.port, timeout=10)
    try:
        worker.set("k", "v")
        assert rdzv_store.get("k") == b"v"
    finally:
        worker.close()

def test_toxiproxy_answers(toxiproxy):
    assert toxiproxy.version()
    assert toxiproxy.proxies() == {}

def test_the_store_works_behind_a_slow_link(toxiproxy, rdzv_store):
    link = toxiproxy.create_proxy("store", f"127.0.0.1:{rdzv_store.port}")
    toxiproxy.add_toxic("store", "latency", attributes={"latency": 50})
    assert [t.type for t in toxiproxy.toxics("store")] == ["latency"]
    host, port = link.listen_address
    worker = TCPStore(host, port, timeout=10)
    try:
        worker.set("k", "v")
        assert rdzv_store.get("k") == b"v"
    finally:
        worker.close()
        toxiproxy.delete_proxy("store")

def test_cluster_names_the_absent_node(harness_cluster):
    report = harness_cluster(
        nodes=2,
        seed=3,
        timeouts={"join": 1},
        fault=[{"kind": "absent", "nodes": [1]}],
        expect={"outcome": "timeout", "nodes": [{"nodes": [1], "outcome": "absent"}]},
    )
    assert report.passed, report.violations
    assert report.seed == 3
    assert [o.status for o in report.outcomes] == ["timeout", "absent"]

def test_cluster_rejects_unknown_keys(harness_cluster):
    with pytest.raises(ScenarioError, match="colour: unknown key"):
        harness_cluster(nodes=2, colour="blue")
"""


def plugin_args() -> list[str]:
    """``-p harness.pytest_plugin`` unless the installed entry point already loads it."""
    installed = any(ep.name == "harness" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "harness.pytest_plugin"]


def make_project(root: Path, ini: str = "", **files: str) -> Path:
    (root / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run_pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", *args]
    return subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False
    )


def test_a_passing_scenario_file_is_one_passed_item_showing_what_each_node_said_with_rP(
    tmp_path: Path,
) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path, "-v", "-rP")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "scenarios/ok.toml::two-nodes-join PASSED" in result.stdout
    assert "1 passed" in result.stdout
    assert "Captured harness nodes call" in result.stdout
    assert "node 1: ok, rank 1, world size 2, after " in result.stdout
    assert "node 1 events:" in result.stdout


def test_a_failing_scenario_shows_violations_nodes_seed_and_replay(tmp_path: Path) -> None:
    make_project(tmp_path, **{"scenarios/bad.toml": FAILING})
    result = run_pytest(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "failed checks:" in out
    assert "[outcome] node 1 ended 'absent', expected 'ok'" in out
    assert "missing ranks: 1" in out
    assert "node 0: timeout" in out
    assert "node 1: absent" in out
    assert "seed: 7" in out
    assert "replay: harness run scenarios/bad.toml --seed 7" in out
    assert "1 failed" in out


def test_the_seed_option_and_its_ini_twin_show_up_in_the_replay_command(tmp_path: Path) -> None:
    make_project(tmp_path, ini="harness_seed = 4242", **{"scenarios/bad.toml": FAILING})
    from_ini = run_pytest(tmp_path)
    assert "replay: harness run scenarios/bad.toml --seed 4242" in from_ini.stdout
    assert "harness: seed 4242 for every scenario (ini harness_seed)" in from_ini.stdout
    from_cli = run_pytest(tmp_path, "--harness-seed", "99")
    assert "replay: harness run scenarios/bad.toml --seed 99" in from_cli.stdout
    assert "harness: seed 99 for every scenario (--harness-seed)" in from_cli.stdout


def test_an_invalid_scenario_is_a_collection_error_naming_the_file_and_key(
    tmp_path: Path,
) -> None:
    make_project(tmp_path, **{"scenarios/invalid.toml": INVALID})
    result = run_pytest(tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ERROR collecting scenarios/invalid.toml" in result.stdout
    assert "colour: unknown key" in result.stdout


def test_a_scenario_file_without_the_harness_extra_is_one_collection_error_saying_so(
    tmp_path: Path,
) -> None:
    # The scratch project's conftest makes one module of the extra unfindable, as in an
    # environment where rdzv was installed without ``[harness]``.
    hide = (
        "import harness._launch as launch\n"
        "launch.REQUIRED = {**launch.REQUIRED, 'no_such_module_rdzv_test': 'no-such-dist'}\n"
    )
    make_project(tmp_path, **{"conftest.py": hide, "scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ERROR collecting scenarios/ok.toml" in result.stdout
    assert (
        "cannot run scenario files: the harness extra is not installed here "
        "(missing: no-such-dist); install it with: pip install 'rdzv-harness[harness]'"
    ) in result.stdout
    assert "Traceback" not in result.stdout


def test_the_header_states_the_seed_policy_and_the_proxy(tmp_path: Path) -> None:
    make_project(tmp_path, **{"test_nothing.py": "def test_x():\n    pass\n"})
    result = run_pytest(tmp_path)
    assert "harness: seed: each scenario's own, else a fresh random one" in result.stdout
    assert "harness: scenarios scenarios/**/*.toml; embedded toxiproxy per run" in result.stdout


def test_the_glob_ini_and_marker_select_scenario_items(tmp_path: Path) -> None:
    make_project(
        tmp_path,
        ini="harness_scenarios = cases/*.toml",
        **{
            "cases/ok.toml": PASSING,
            "scenarios/ignored.toml": INVALID,
            "test_plain.py": "def test_plain():\n    pass\n",
        },
    )
    result = run_pytest(tmp_path, "-m", "harness_scenario", "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cases/ok.toml::two-nodes-join PASSED" in result.stdout
    assert "1 passed, 1 deselected" in result.stdout


def test_a_toml_file_named_on_the_command_line_is_collected_outside_the_glob(
    tmp_path: Path,
) -> None:
    make_project(
        tmp_path,
        ini="harness_scenarios = cases/*.toml",
        **{"elsewhere/bad.toml": INVALID, "elsewhere/ok.toml": PASSING},
    )
    bad = run_pytest(tmp_path, "elsewhere/bad.toml")
    assert "ERROR: not found" not in bad.stdout + bad.stderr
    assert "ERROR collecting elsewhere/bad.toml" in bad.stdout
    assert "colour: unknown key" in bad.stdout
    ok = run_pytest(tmp_path, "elsewhere/ok.toml", "-v")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "elsewhere/ok.toml::two-nodes-join PASSED" in ok.stdout


def test_a_bad_toxiproxy_address_is_a_usage_error_naming_the_ini_key(tmp_path: Path) -> None:
    make_project(tmp_path, ini="harness_toxiproxy = nowhere", **{"test_x.py": "def test_x(): pass"})
    result = run_pytest(tmp_path)
    assert result.returncode == 4
    assert "ini harness_toxiproxy: 'nowhere' is not HOST:PORT" in result.stderr


def test_the_report_option_writes_junit_and_html(tmp_path: Path) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path, "--harness-report", "out")
    assert result.returncode == 0, result.stdout + result.stderr
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert 'name="two-nodes-join"' in junit
    assert "two-nodes-join" in (tmp_path / "out" / "report.html").read_text()
    assert "harness: wrote" in result.stdout


def test_the_report_ini_twin_writes_below_the_rootdir(tmp_path: Path) -> None:
    make_project(tmp_path, ini="harness_report = from-ini", **{"scenarios/bad.toml": FAILING})
    result = run_pytest(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    junit = (tmp_path / "from-ini" / "junit.xml").read_text()
    assert '<failure message="[outcome] node 0 ended' in junit
    assert "replay: harness run scenarios/bad.toml --seed 7" in junit


def test_an_unrelated_run_imports_no_heavy_module(tmp_path: Path) -> None:
    make_project(tmp_path, **{"test_unrelated.py": UNRELATED})
    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_loading_the_plugin_warns_nothing() -> None:
    # pytest rewrites the asserts of a plugin's modules only if it imports them first; the
    # package importing its own plugin modules early made every run of this repo's suite
    # warn "Module already imported so cannot be rewritten" once per module and process
    # the console script, as the README runs it: ``python -m pytest`` puts the repo first on
    # sys.path, where an editable install's modules are found (and rewritten) another way
    script = Path(sys.executable).with_name("pytest")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pytest"]
    result = subprocess.run(
        [*command, "-n0", "-p", "no:cacheprovider", "--collect-only",
         "-q", "-W", "error::pytest.PytestAssertRewriteWarning", "tests/test_docs_links.py"],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stdout.lower(), result.stdout


def test_the_fixtures_give_a_store_a_proxy_and_a_cluster(tmp_path: Path) -> None:
    make_project(tmp_path, **{"test_fixtures.py": FIXTURES})
    result = run_pytest(tmp_path, "-v")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 passed" in result.stdout


def test_the_toxiproxy_option_points_items_and_fixtures_at_a_running_server(tmp_path: Path) -> None:
    from harness.proxy.api import ToxiproxyServer

    make_project(tmp_path, **{"scenarios/ok.toml": PASSING, "test_fixtures.py": FIXTURES})
    with ToxiproxyServer() as server:
        result = run_pytest(tmp_path, "--toxiproxy", f"{server.host}:{server.port}")
        used = server.events()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout
    assert f"toxiproxy {server.host}:{server.port}" in result.stdout
    assert used, "the scenario never went through the --toxiproxy server"


TOXIPROXY_USER = """
def test_toxiproxy_answers(toxiproxy):
    assert toxiproxy.version()
"""


def test_an_unreachable_toxiproxy_fails_each_test_that_needs_it_in_one_line(
    tmp_path: Path,
) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING, "test_user.py": TOXIPROXY_USER})
    with socket.socket() as nothing:  # bound, never listening: connections are refused
        nothing.bind(("127.0.0.1", 0))
        port = nothing.getsockname()[1]
        result = run_pytest(tmp_path, "--toxiproxy", f"127.0.0.1:{port}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 error" in result.stdout  # the scenario; the fixture's setup
    said = (
        f"--toxiproxy: cannot reach toxiproxy at http://127.0.0.1:{port} for GET /version: "
        "connection refused; is the server running there?"
    )
    assert result.stdout.splitlines().count(said) == 2, result.stdout
    assert "Traceback" not in result.stdout
    assert "urllib3" not in result.stdout


def test_harness_backend_runs_every_item_on_that_backend_and_skips_what_it_cannot_run(
    tmp_path: Path,
) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path, "-rs", "--harness-backend", "no_such_module_xyz:make")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "backend no_such_module_xyz:make" in result.stdout  # the report header
    assert "1 skipped" in result.stdout
    assert "not run on no_such_module_xyz:make: no module named 'no_such_module_xyz'" in (
        result.stdout
    )


def test_an_unknown_harness_backend_is_a_usage_error(tmp_path: Path) -> None:
    make_project(tmp_path, "harness_backend = bogus", **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "ini harness_backend: unknown backend 'bogus'" in result.stderr


def test_an_unknown_harness_world_is_a_usage_error(tmp_path: Path) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path, "--harness-world", "moon")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "--harness-world: expected one of local, netns, ray, got 'moon'" in result.stderr


def test_a_pack_below_two_is_a_usage_error(tmp_path: Path) -> None:
    make_project(tmp_path, "harness_pack = 1", **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "ini harness_pack: expected a whole number of at least 2, got '1'" in result.stderr


def test_the_pack_option_runs_scenario_items_packed(tmp_path: Path) -> None:
    make_project(tmp_path, **{"scenarios/ok.toml": PASSING})
    result = run_pytest(tmp_path, "--harness-pack", "2", "--harness-report", "out")
    assert result.returncode == 0, result.stdout + result.stderr
    # the started events (in the HTML timeline) say where each node ran
    assert "packed: 2 nodes per process" in (tmp_path / "out" / "report.html").read_text()


CLUSTER_ON_A_MISSING_BACKEND = """
def test_cluster_on_a_backend_that_cannot_run(harness_cluster):
    harness_cluster(nodes=2, backend="no_such_module_xyz:make")
    raise AssertionError("harness_cluster ran a scenario its backend cannot run")
"""


def test_harness_cluster_skips_a_scenario_its_backend_cannot_run_as_an_item_is(
    tmp_path: Path,
) -> None:
    make_project(tmp_path, **{"test_missing.py": CLUSTER_ON_A_MISSING_BACKEND})
    result = run_pytest(tmp_path, "-rs", "test_missing.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout
    assert "no module named 'no_such_module_xyz'" in result.stdout
