"""``harness from-log`` on the command line: a file or stdin in, a scenario out that loads,
the explanation on stderr, exit 2 with the reason when the log says too little."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from harness.cli import build_parser
from harness.scenario.load import load

LOGS = Path(__file__).with_name("from_log_logs")


def main(argv: list[str]) -> int:
    """The command's own function, without main()'s SIGUSR1 handler (it needs a real
    stderr file, which capsys replaces)."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


def test_from_log_writes_a_scenario_that_loads_and_says_what_it_assumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay-dns.toml"
    assert main(["from-log", str(LOGS / "dns.log"), "-o", str(out)]) == 0
    scenario = load(out)
    assert scenario.name == "replay-dns" and scenario.endpoint.host == "master-0.svc.test"
    err = capsys.readouterr().err
    assert "inferred: the store's name did not resolve on node(s) [1]" in err
    assert "assumed: node 0 is not in the log" in err
    assert f"run it with: harness run {out}" in err


def test_from_log_reads_stdin_and_explains_every_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (LOGS / "glog-timeout.log").read_text(encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["from-log", "-", "--explain"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("# written by `harness from-log`")
    assert "trace:" in captured.err and "-:3 [glog] cause" in captured.err


def test_from_log_exits_2_naming_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "chatter.log"
    empty.write_text("epoch 1 loss 0.3\nepoch 2 loss 0.2\n", encoding="utf-8")
    assert main(["from-log", str(empty)]) == 2
    assert "says how a node ended or what failed" in capsys.readouterr().err
    assert main(["from-log", str(tmp_path / "nope.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
