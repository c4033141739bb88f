"""``harness proxy``: the standalone server, started as a real process."""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_helpers import harness
from proxy_helpers import UpstreamServer

from harness.cli import build_parser, version
from harness.cli.proxy import port_number
from harness.proxy.client import ToxiproxyClient

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def harness_proxy(*args: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "harness.cli", "proxy", *args]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def announced_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "harness proxy printed nothing within 30 s"
    line = proc.stdout.readline()
    assert line.startswith("harness proxy: API on http://"), line
    return line.split()[4]


def test_harness_proxy_serves_the_api_with_the_given_seed_and_stops_on_sigterm() -> None:
    with harness_proxy("--port", "0", "--seed", "7") as proc:
        client = ToxiproxyClient.from_url(announced_url(proc))
        assert client.version().startswith("2.")
        assert client.seed() == 7
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_harness_proxy_creates_the_proxies_of_its_config_file(
    tmp_path: Path, upstream: UpstreamServer
) -> None:
    config = tmp_path / "proxies.json"
    entry = {"name": "from_config", "upstream": upstream.address, "listen": "127.0.0.1:0"}
    config.write_text(json.dumps([entry]))
    with harness_proxy("--port", "0", "--config", str(config)) as proc:
        client = ToxiproxyClient.from_url(announced_url(proc))
        assert client.get_proxy("from_config").upstream == upstream.address


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('[{"upstream": "127.0.0.1:1"}]', "missing required field: name at proxy 1"),
    ],
)
def test_harness_proxy_names_the_config_file_it_cannot_use(
    tmp_path: Path, content: str, message: str
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(content)
    with harness_proxy("--port", "0", "--config", str(config)) as proc:
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert f"--config {config}" in err
    assert message in err


def test_harness_proxy_reports_an_api_port_in_use() -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = str(squatter.getsockname()[1])
        with harness_proxy("--port", port) as proc:
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "address already in use" in err


def test_a_second_harness_proxy_on_the_same_port_exits_1_with_the_bind_error() -> None:
    with harness_proxy("--port", "0") as first:
        port = announced_url(first).rsplit(":", 1)[1].strip("/")
        with harness_proxy("--port", port) as second:
            _, err = second.communicate(timeout=30)
        assert second.returncode == 1
        assert f"listen tcp 127.0.0.1:{port}: bind: address already in use" in err
        assert ToxiproxyClient.from_url(f"http://127.0.0.1:{port}").version().startswith("2.")


def test_the_command_line_requires_a_command_and_offers_proxy() -> None:
    parser = build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args([])
    args = parser.parse_args(["proxy", "--port", "0", "--seed", "3"])
    assert (args.command, args.host, args.port, args.seed) == ("proxy", "127.0.0.1", 0, 3)


@pytest.mark.parametrize("port", ["70000", "abc", "-1"])
def test_a_bad_port_is_a_usage_error_naming_the_value(port: str) -> None:
    with pytest.raises(
        argparse.ArgumentTypeError,
        match=rf"a port is a whole number from 0 to 65535 \(0 picks a free one\), got '{port}'",
    ):
        port_number(port)
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["proxy", "--port", port])
    assert exit_info.value.code == 2


def test_harness_proxy_with_a_port_out_of_range_exits_2_without_a_traceback() -> None:
    with harness_proxy("--port", "70000") as proc:
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "argument --port: a port is a whole number from 0 to 65535" in err
    assert "Traceback" not in err


def test_harness_version_names_the_installed_version(tmp_path: Path) -> None:
    done = harness("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"harness {version()}\n"
    shown = r"harness (\d+\.\d+\S* \(\S+\)|unknown: no installed distribution ships)"
    assert re.match(shown, done.stdout), done.stdout
