"""``harness fuzz`` and ``harness replay`` as real processes.

A deliberately broken backend (``fake_backends:eager``, which succeeds without waiting for
anybody) must be caught: fuzz finds a failing scenario, shrinks it, writes it, and both
``harness run`` and ``harness replay`` of that file fail the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import harness

from harness.scenario.load import load

# Whole fuzz sessions through the CLI (tens of seconds each): `tox -e long`.
pytestmark = pytest.mark.long

BROKEN = "fake_backends:eager"
SEED = "14"


#: Checks a rerun must break again: the invariants, decided by what the backend returned.
#: (``outcome``, ``message`` and ``elapsed`` may hinge on timing under load: a node's
#: shared-store proof meeting its deadline or not.)
INVARIANTS = {"complete_round", "ranks", "world_size"}


def failed_checks(description: str) -> set[str]:
    """The check names the fuzzer recorded: '... Failed checks: ranks, outcome. ...'."""
    listed = re.search(r"Failed checks: ([\w, ]+)\.", description)
    assert listed is not None, description
    return set(listed.group(1).split(", "))


def recurring_checks(description: str) -> set[str]:
    """The recorded checks a rerun must fail again (at least one is recorded)."""
    found = failed_checks(description) & INVARIANTS
    assert found, description
    return found


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """One fuzz session against the broken backend: (the file it wrote, its stdout).

    Only ``absent`` is drawn (``--kinds``): the broken backend fails every scenario with an
    absent node on every run, whatever the load, and no fault whose effect hinges on timing
    (a kill or a restart on an event) can come first. Unrestricted, the seed once drew a
    restart 0.1 s after a node's ``joined`` first: under load it failed once and passed when
    run again (the node had already ended), so the file could not reproduce it.
    """
    work = tmp_path_factory.mktemp("fuzz")
    done = harness(
        "fuzz",
        *("--budget", "12", "--seed", SEED, "--kinds", "absent"),
        *("--out", "found", "--backend", BROKEN),
        cwd=work,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    files = sorted((work / "found").glob("*.toml"))
    assert len(files) == 1, done.stdout
    yield files[0], done.stdout


def test_fuzz_finds_shrinks_and_writes_the_broken_backend_s_failure(
    found: tuple[Path, str],
) -> None:
    path, stdout = found
    scenario = load(path)
    assert scenario.backend == BROKEN
    assert scenario.seed is not None
    assert f"harness fuzz --seed {SEED}" in scenario.description
    assert failed_checks(scenario.description) & {"complete_round", "ranks", "outcome"}
    assert re.search(r"^\[1/12\] fuzz-\w+ .* (PASS|FAIL)", stdout, re.MULTILINE)
    assert f"1 failing scenario written to found/{path.name}" in stdout
    # the backend is a module:factory: the replay line says how to make it importable
    here = Path(__file__).resolve().parent
    assert f"(run it: PYTHONPATH={here} harness run found/{path.name};" in stdout
    assert "needs module 'fake_backends' importable where it runs" in stdout


def test_harness_run_of_the_written_file_fails_the_same_way(found: tuple[Path, str]) -> None:
    path, _ = found
    done = harness("run", str(path), cwd=path.parent)
    assert done.returncode == 1, done.stdout + done.stderr
    for check in recurring_checks(load(path).description):
        assert check in done.stdout, f"{check} not in:\n{done.stdout}"


def test_harness_replay_reruns_the_file_with_its_recorded_seed(found: tuple[Path, str]) -> None:
    path, _ = found
    done = harness("replay", str(path), "--html", "replay.html", cwd=path.parent)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"seed {load(path).seed}" in done.stdout
    for check in recurring_checks(load(path).description):
        assert check in done.stdout, f"{check} not in:\n{done.stdout}"
    assert (path.parent / "replay.html").read_text(encoding="utf-8").startswith("<!")


def test_fuzz_of_the_real_backend_with_a_small_budget_finds_nothing(tmp_path: Path) -> None:
    done = harness("fuzz", "--budget", "2", "--seed", "11", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no failure found" in done.stdout
    assert not (tmp_path / "out").exists()


def test_replay_of_a_file_without_a_seed_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "bare.toml").write_text(
        'name = "bare"\ndescription = "No seed recorded."\nnodes = 2\n', encoding="utf-8"
    )
    done = harness("replay", "bare.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert re.search(r"bare\.toml:\n  - seed: the file records no seed", done.stderr)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--budget", "0"), "--budget takes a whole number of at least 1, got '0'"),
        (("--backend", "nope"), "unknown backend 'nope'"),
        (("--world", "ray"), "argument --world: invalid choice: 'ray'"),
        (("--kinds", "filtr"), "argument --kinds: unknown fault kind(s) filtr in 'filtr'"),
        (("--kinds", "absent,drop"), "--kinds: the local world cannot carry out drop (needs"),
    ],
)
def test_fuzz_rejects_bad_options_with_status_2(
    tmp_path: Path, args: tuple[str, ...], complaint: str
) -> None:
    done = harness("fuzz", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert complaint in done.stderr
