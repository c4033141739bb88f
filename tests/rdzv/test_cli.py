"""``python -m rdzv`` run as a user runs it: a subprocess, its output and its exit status.

Every process a test starts is terminated and waited for in a ``finally``; every socket a
test binds is closed there too.
"""

from __future__ import annotations

import errno
import os
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest

import rdzv
from rdzv.store.client import TCPStore

REPO_ROOT = Path(rdzv.__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "100"}


def _rdzv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rdzv", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def serving() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``python -m rdzv serve --port 0`` once it printed its ``listening on`` line."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rdzv", "serve", "--port", "0"],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        assert line, f"serve printed nothing within 60 s (exit status {proc.poll()})"
        yield proc, line.strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _installed_version() -> str:
    for name in [*metadata.packages_distributions().get("rdzv", []), "rdzv", "rdzv-harness"]:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    pytest.skip("rdzv is not installed as a distribution here")


def test_version_prints_the_installed_package_version() -> None:
    result = _rdzv("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"rdzv {_installed_version()}\n"


def test_help_is_plain_text_that_names_every_command() -> None:
    result = _rdzv("--help")
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout, "--help shows raw reST markup"
    assert re.search(r"^\s+serve\s+run a standalone store server", result.stdout, re.M)
    assert re.search(r"^\s+smoke\s+start a server and N clients", result.stdout, re.M)
    assert "exit status: 0 success, 1 " in result.stdout


def test_serve_help_shows_the_defaults() -> None:
    result = _rdzv("serve", "--help")
    assert result.returncode == 0, result.stderr
    assert re.search(r"--host HOST .*\(default: 127\.0\.0\.1\)", result.stdout)
    assert re.search(r"--port PORT .*\(default: 29400\)", result.stdout)
    assert "``" not in result.stdout


def test_serve_listens_on_loopback_only_unless_told_otherwise_and_serves_clients(
    serving: tuple[subprocess.Popen[str], str],
) -> None:
    proc, line = serving
    found = re.fullmatch(r"listening on 127\.0\.0\.1:(\d+)", line)
    assert found, line
    port = int(found.group(1))
    assert port != 0
    with TCPStore("127.0.0.1", port, timeout=30) as client:
        client.set("k", "v")
        assert client.get("k") == b"v"
    listening = [
        c.laddr
        for c in psutil.Process(proc.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening == [("127.0.0.1", port)]


def test_serve_exits_0_on_sigterm(serving: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = serving
    proc.terminate()
    assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None
    assert proc.stderr.read() == ""


def test_serve_on_a_port_in_use_is_one_line_naming_host_port_and_errno_and_exits_1() -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _rdzv("serve", "--port", str(port))
    finally:
        taken.close()
    assert result.returncode == 1
    assert result.stdout == ""
    reason = re.escape(os.strerror(errno.EADDRINUSE))
    assert re.fullmatch(
        rf"rdzv serve: cannot listen on 127\.0\.0\.1:{port}: \[Errno {errno.EADDRINUSE}\] "
        rf"{reason}; pick another --port, or stop the process holding this one\n",
        result.stderr,
    ), result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param((), r"the following arguments are required: COMMAND", id="no-command"),
        pytest.param(
            ("serve", "--port", "70000"), r"--port: 70000 is outside 0\.\.65535", id="port-range"
        ),
        pytest.param(
            ("serve", "--port", "http"), r"--port: 'http' is not a port number", id="port-text"
        ),
        pytest.param(
            ("smoke", "--clients", "0"), r"--clients: must be at least 1, got 0", id="clients"
        ),
        pytest.param(("listen",), r"invalid choice: 'listen'", id="unknown-command"),
    ],
)
def test_bad_arguments_exit_2_with_a_usage_line(args: tuple[str, ...], message: str) -> None:
    result = _rdzv(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m rdzv")
    assert re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.stderr
