"""What a plain ``pytest`` (the README's test command) runs, and what it leaves to tox.

The tests that create network namespaces (marked ``netns``) are left to ``tox -e netns``, as
the README says, and the long end-to-end runs (marked ``long``) to ``tox -e long``; each tox
env's own ``-m`` selects them again. Checked by collecting in a subprocess with the
repository's own configuration (``pyproject.toml``), nothing run.
"""

from __future__ import annotations

import configparser
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _collected(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def _tox_pytest(env: str) -> list[str]:
    """The arguments of the pytest command of tox env ``env`` (``{posargs}`` dropped)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    for line in tox[f"testenv:{env}"]["commands"].splitlines():
        words = shlex.split(line.replace("{posargs}", ""))
        if words[:1] == ["pytest"]:
            return words[1:]
    raise AssertionError(f"tox -e {env} runs no pytest")


def test_a_plain_pytest_leaves_the_tests_that_create_namespaces_to_tox() -> None:
    plain = _collected("tests/netns")
    assert plain, "the netns world's unit tests (no namespace) still run"
    assert not any("test_netns_world.py" in test for test in plain), sorted(plain)


def test_tox_netns_runs_every_test_that_creates_namespaces() -> None:
    marked = _collected(*_tox_pytest("netns"))
    assert {t.split("::")[0] for t in marked} == {
        "tests/netns/test_netns_world.py",
        "tests/netns/test_netns_dial.py",
        "tests/harness/test_from_log_netns.py",  # from-log's round trip of scenarios/netns
        "tests/harness/test_from_log_property.py",  # its netns examples
    }
    world = (REPO / "tests" / "netns" / "test_netns_world.py").read_text()
    assert len(marked) >= world.count("\ndef test_")
