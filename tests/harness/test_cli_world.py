"""``harness run --world``: every scenario in the world named, judged by what it can do."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import harness


def test_the_world_option_of_harness_run_puts_every_scenario_in_that_world(
    tmp_path: Path,
) -> None:
    (tmp_path / "toxic.toml").write_text(
        'name = "toxic"\ndescription = "a toxic"\nnodes = 2\n'
        '[[fault]]\nkind = "toxic"\ntype = "latency"\nattributes = { latency = 10 }\n'
    )
    result = harness("run", "toxic.toml", "--world", "netns", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the netns world cannot put toxics on a node's link" in result.stdout


def test_an_unknown_world_option_is_a_usage_error(tmp_path: Path) -> None:
    result = harness("run", "x.toml", "--world", "moon", cwd=tmp_path)
    assert result.returncode == 2
    assert "invalid choice: 'moon'" in result.stderr
