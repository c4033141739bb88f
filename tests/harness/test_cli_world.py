"""``harness run --world``: every scenario in the world named, judged by what it can do."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import harness


def test_the_world_option_of_harness_run_puts_every_scenario_in_that_world(
    tmp_path: Path,
) -> None:
    (tmp_path / "squatter.toml").write_text(
        'name = "squatter"\ndescription = "a squatter"\nnodes = 2\n'
        '[[fault]]\nkind = "squatter"\nmode = "silent"\n'
    )
    result = harness("run", "squatter.toml", "--world", "netns", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not run: the netns world cannot hold the store's port with a squatter" in (
        result.stdout
    )


def test_an_unknown_world_option_is_a_usage_error(tmp_path: Path) -> None:
    result = harness("run", "x.toml", "--world", "moon", cwd=tmp_path)
    assert result.returncode == 2
    assert "invalid choice: 'moon'" in result.stderr
