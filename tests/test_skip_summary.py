"""``pytest -ra`` shows one line for every test skipped because torch is absent.

Runs pytest in a subprocess on a scratch project that holds a copy of the repository's
root ``conftest.py``; the scratch tests make ``torch`` absent themselves (an import hook),
so this holds whether or not torch is installed here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRATCH_TESTS = """
import sys

import pytest


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return None


sys.meta_path.insert(0, _NoTorch())


@pytest.fixture
def dist():
    return pytest.importorskip("torch.distributed")


def test_torch_itself():
    pytest.importorskip("torch")


@pytest.mark.parametrize("n", [1, 2])
def test_torch_in_a_fixture(dist, n):
    pass


def test_torch_submodule():
    pytest.importorskip("torch.distributed.elastic.rendezvous.utils")


def test_torch_installed_but_broken():
    pytest.skip("could not import 'torch.distributed': No module named 'torch._C'")


def test_other_reason():
    pytest.importorskip("torchvision_absent_here")
"""


def _line(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` containing ``needle``."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_skips_for_an_absent_torch_fold_into_one_summary_line(tmp_path: Path) -> None:
    conftest = (REPO / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_scratch.py").write_text(SCRATCH_TESTS)

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-ra", "-q", "-p", "no:cacheprovider", "-p", "no:harness"],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    hook = _line(conftest, "@pytest.hookimpl(wrapper=True)")
    broken = _line(SCRATCH_TESTS, "torch._C")
    other = _line(SCRATCH_TESTS, "torchvision_absent_here")
    torch_absent = "torch is not installed (pip install -e '.[torch]' installs torch==2.13.0)"
    torch_broken = "could not import 'torch.distributed': No module named 'torch._C'"
    unrelated = (
        "could not import 'torchvision_absent_here': No module named 'torchvision_absent_here'"
    )
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert sorted(skipped) == [
        f"SKIPPED [1] test_scratch.py:{broken}: {torch_broken}",
        f"SKIPPED [1] test_scratch.py:{other}: {unrelated}",
        f"SKIPPED [4] conftest.py:{hook}: {torch_absent}",
    ], done.stdout
