"""rdzv installs and works on its own; the harness's dependencies live behind its extra.

The rdzv-only distribution ``rdzv`` (``packaging/rdzv``: ``pip install ./packaging/rdzv``)
ships the ``rdzv`` package alone: no ``harness`` package, no console script, no pytest
plugin, no dependency. The repository's full distribution has a name of its own,
``rdzv-harness``, so the two wheels never share a file name. Tests build both wheels and
look inside.

``pip install .`` (no extra) installs the ``rdzv`` and ``harness`` packages and nothing
else. The end-to-end tests reproduce that install: a fresh virtual environment without pip
and without the system's site-packages, holding only copies of the two packages, in which
``import rdzv`` and a two-node rendezvous must work on the standard library alone and the
``harness`` command must say in one line that it needs its extra.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from harness._launch import INSTALL_HINT, REQUIRED

REPO = Path(__file__).resolve().parents[1]

# Run inside the bare environment: a two-node static rendezvous (two threads; node 0 adopts
# a listening socket bound to port 0), a key exchanged through the store, and the modules
# that got loaded.
_RENDEZVOUS = """
import importlib.util
import json
import socket
import sys
import threading

import rdzv
from rdzv import RendezvousParameters, get_rendezvous_handler

listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]
listen_fd = listener.detach()  # the hosting node takes ownership
results, errors = {}, {}

def node(rank):
    extra = {"listen_fd": listen_fd} if rank == 0 else {}
    params = RendezvousParameters(
        backend="static", endpoint=f"127.0.0.1:{port}", run_id="standalone",
        min_nodes=2, max_nodes=2, rank=rank, timeout=60, **extra,
    )
    handler = get_rendezvous_handler(params)
    try:
        info = handler.next_rendezvous()
        info.store.set(f"hello/{info.rank}", f"from rank {info.rank}")
        peer = info.store.get(f"hello/{1 - info.rank}").decode()
        results[rank] = [info.rank, info.world_size, peer]
    except BaseException as exc:
        errors[f"rank {rank}"] = f"{type(exc).__name__}: {exc}"
    try:
        handler.shutdown()
    except BaseException as exc:
        errors[f"rank {rank} shutdown"] = f"{type(exc).__name__}: {exc}"

threads = [threading.Thread(target=node, args=(rank,), daemon=True) for rank in (0, 1)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(90)
foreign = sorted(
    name for name in sys.modules
    if name.partition(".")[0] not in sys.stdlib_module_names | {"rdzv", "__main__"}
)
print(json.dumps({
    "rdzv": rdzv.__file__,
    "results": results,
    "errors": errors,
    "alive": [t.is_alive() for t in threads],
    "foreign": foreign,
    "pytest_found": importlib.util.find_spec("pytest") is not None,
}))
"""


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with no pip and no system site-packages, holding copies of ``rdzv`` and
    ``harness`` only (what ``pip install .`` without the extra installs); its python."""
    root = tmp_path_factory.mktemp("bare-env")
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    for package in ("rdzv", "harness"):
        shutil.copytree(
            REPO / package,
            Path(purelib, package),
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return python


_PURELIB = "import sysconfig; print(sysconfig.get_path('purelib'))"


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -I: no PYTHONPATH, no user site-packages, no current directory on sys.path.
    return subprocess.run(
        [python, "-I", *args], check=False, capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_rdzv_has_no_dependencies(pyproject: dict[str, Any]) -> None:
    assert pyproject["project"].get("dependencies", []) == []


def test_the_full_distribution_is_named_apart_from_the_library(
    pyproject: dict[str, Any],
) -> None:
    with (REPO / "packaging" / "rdzv" / "pyproject.toml").open("rb") as file:
        library = tomllib.load(file)["project"]
    assert library["name"] == "rdzv"
    assert pyproject["project"]["name"] == "rdzv-harness"


def test_harness_extra_provides_every_module_the_harness_command_checks_for(
    pyproject: dict[str, Any],
) -> None:
    extra = pyproject["project"]["optional-dependencies"]["harness"]
    assert {Requirement(r).name for r in extra} == set(REQUIRED.values())


@pytest.mark.parametrize("extra", ["test", "ray"])
def test_the_test_and_ray_extras_install_the_harness_extra_of_this_distribution(
    pyproject: dict[str, Any], extra: str
) -> None:
    project = pyproject["project"]
    names = [Requirement(r) for r in project["optional-dependencies"][extra]]
    assert any(r.name == project["name"] and r.extras == {"harness"} for r in names), names


def test_harness_script_checks_for_its_extra_before_importing_the_cli(
    pyproject: dict[str, Any],
) -> None:
    assert pyproject["project"]["scripts"]["harness"] == "harness._launch:main"
    assert "from harness._launch import main" in (REPO / "harness" / "__main__.py").read_text()


def test_rdzv_imports_and_completes_a_rendezvous_with_nothing_else_installed(
    bare_env: Path, tmp_path: Path
) -> None:
    done = _run(bare_env, "-c", _RENDEZVOUS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)

    assert not seen["pytest_found"], "the bare environment sees the test environment's packages"
    assert Path(seen["rdzv"]).is_relative_to(bare_env.parent.parent), seen["rdzv"]
    assert seen["errors"] == {}, done.stderr
    assert seen["alive"] == [False, False]
    assert seen["results"] == {
        "0": [0, 2, "from rank 1"],
        "1": [1, 2, "from rank 0"],
    }
    assert seen["foreign"] == [], "rdzv loaded modules outside the standard library"


def test_harness_command_says_in_one_line_that_it_needs_its_extra(
    bare_env: Path, tmp_path: Path
) -> None:
    done = _run(bare_env, "-m", "harness", "run", "scenarios/", cwd=tmp_path)

    missing = ", ".join(sorted(REQUIRED.values()))
    assert done.returncode == 1
    assert done.stdout == ""
    reason = f"the harness needs its extra, which is not installed here (missing: {missing})"
    assert done.stderr == f"harness: {reason}; install it with: {INSTALL_HINT}\n"
    assert INSTALL_HINT == (
        "pip install 'rdzv-harness[harness]' (from a checkout: pip install '.[harness]')"
    )


_NEEDS_SETUPTOOLS = pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None, reason="building a wheel needs setuptools"
)


def _wheel(source: Path, out: Path) -> Path:
    """Build ``source``'s wheel into ``out`` in isolation, as pip builds it for a user (the
    test environment's own setuptools plays no part); the one new wheel's path."""
    before = set(out.glob("*.whl"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(source), "-w", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def _full_source(tmp_path: Path) -> Path:
    """A copy of what the repository's own build reads (no build files left in the repo)."""
    source = tmp_path / "full"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("rdzv", "harness"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return source


@_NEEDS_SETUPTOOLS
def test_the_library_and_the_full_distribution_build_wheels_of_different_names(
    tmp_path: Path,
) -> None:
    out = tmp_path / "wheels"
    out.mkdir()
    library = _wheel(_library_source(tmp_path), out)
    full = _wheel(_full_source(tmp_path), out)

    assert library.name == "rdzv-0.1.0-py3-none-any.whl"
    assert full.name == "rdzv_harness-0.1.0-py3-none-any.whl"
    names = zipfile.ZipFile(full).namelist()
    assert {name.split("/")[0] for name in names} >= {"rdzv", "harness"}
    info = next(name for name in names if name.endswith(".dist-info/METADATA"))
    metadata = zipfile.ZipFile(full).read(info).decode()
    assert "Name: rdzv-harness\n" in metadata
    # It ships rdzv itself: a checkout installs with no index that holds rdzv.
    assert not any(
        Requirement(line.removeprefix("Requires-Dist: ")).name == "rdzv"
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ")
    )


def _library_source(tmp_path: Path) -> Path:
    source = tmp_path / "source"  # a copy (its rdzv link resolved): no build files in the repo
    shutil.copytree(
        REPO / "packaging" / "rdzv", source, ignore=shutil.ignore_patterns("__pycache__")
    )
    return source


@_NEEDS_SETUPTOOLS
def test_the_rdzv_only_distribution_ships_rdzv_alone(tmp_path: Path) -> None:
    out = tmp_path / "wheels"
    out.mkdir()
    wheel = _wheel(_library_source(tmp_path), out)
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = wheel.name.split("-py")[0] + ".dist-info"
    assert {name.split("/")[0] for name in names} == {"rdzv", dist_info}
    shipped = {name for name in names if name.startswith("rdzv/")}
    ours = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "rdzv").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shipped == ours  # the whole library, the same files
    meta = zipfile.ZipFile(wheel)
    info = next(name for name in names if name.endswith(".dist-info/METADATA"))
    metadata = meta.read(info).decode()
    assert "Name: rdzv\n" in metadata
    assert "Requires-Dist" not in metadata and "Provides-Extra" not in metadata
    # one entry point: torchrun's backend `rdzv` (torchrun loads rdzv.torchrun through it)
    (points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    entry_points = meta.read(points).decode()
    assert "[torchrun.handlers]\nrdzv = rdzv.torchrun:handler_creator" in entry_points


# Prints the files of the packages (from site-packages) that torchrun's agent and a gloo
# worker import: torch and its own dependencies, without rdzv.
_TORCH_PACKAGES = """
import json, sys, sysconfig
import torch.distributed.run
from torch.distributed.elastic.agent.server import local_elastic_agent
from torch.distributed.elastic.rendezvous import registry
site = sysconfig.get_path("purelib")
files = {
    getattr(module, "__file__", None) or "" for module in list(sys.modules.values())
}
tops = {
    f[len(site) + 1 :].split("/")[0] for f in files if f.startswith(site + "/")
}
print(json.dumps(sorted(
    f"{site}/{top}" for top in tops if not top.startswith(("_", "rdzv", "harness"))
)))
"""


@_NEEDS_SETUPTOOLS
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torchrun_runs_the_rdzv_backend_of_the_installed_rdzv_wheel(tmp_path: Path) -> None:
    # `pip install rdzv` and nothing else of ours: the wheel installed into a fresh venv,
    # torch (with what it imports) linked in from this environment by a .pth file
    from tests.rdzv.torchrun_jobs import torchrun_job

    out = tmp_path / "wheels"
    out.mkdir()
    wheel = _wheel(_library_source(tmp_path), out)
    root = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, system_site_packages=False, symlinks=True).create(root)
    python = root / "bin" / "python"
    purelib = Path(_run(python, "-c", _PURELIB, cwd=tmp_path).stdout.strip())
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*install, "--target", str(purelib), str(wheel)], check=True, timeout=300)
    linked = tmp_path / "torch-only"
    linked.mkdir()
    found = subprocess.run(
        [sys.executable, "-c", _TORCH_PACKAGES], capture_output=True, text=True, check=True
    )
    for package in map(Path, json.loads(found.stdout)):
        (linked / package.name).symlink_to(package)
    (purelib / "torch-only.pth").write_text(f"{linked}\n")

    with torchrun_job(tmp_path, 2, python=(str(python), "-I"), env={"PYTHONPATH": ""}) as job:
        codes = job.wait(240)
        outputs = [agent.output() for agent in job.agents]
        assert codes == [0, 0], outputs
        results = [row for agent in job.agents for row in agent.results()]
        assert sorted(r["rank"] for r in results) == ["0", "1"]
        assert {r["sum"] for r in results} == {"3"}
        assert "rank_source: rank 1 of 2 from torchrun's --node-rank" in outputs[1]
