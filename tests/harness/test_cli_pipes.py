"""The ``harness`` commands when the reader of their output goes away (``| head -1``): they
go on quietly and end with their own exit status, never a traceback or a made-up failure."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import HAPPY, harness_into_a_closed_pipe


def test_list_into_a_pipe_whose_reader_left_exits_0_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "happy.toml").write_text(HAPPY)
    done = harness_into_a_closed_pipe("list", "happy.toml", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_passing_run_into_a_pipe_whose_reader_left_still_exits_0(tmp_path: Path) -> None:
    # rich's console exits 1 at the first line it cannot write: "a scenario failed"
    (tmp_path / "happy.toml").write_text(HAPPY)
    done = harness_into_a_closed_pipe("run", "happy.toml", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
