"""The plugin's options and ini keys: declared, read, validated, shown in the header.

Each option has an ini twin (the option wins); :func:`pytest_configure` reads them all once
so that a bad value fails the session at start-up with a usage error naming the option or
ini key, not every item. The readers are what the rest of the plugin asks.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.run.model import Report

__all__ = [
    "DEFAULT_GLOB",
    "MARKER",
    "REPORTS",
    "backend_override",
    "overrides",
    "pack_override",
    "parse_toxiproxy_address",
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_header",
    "ray_address",
    "report_dir",
    "seed_override",
    "toxiproxy_address",
    "world_override",
]

MARKER = "harness_scenario"
DEFAULT_GLOB = "scenarios/**/*.toml"
#: The reports of the session's scenario items (written out at the end, see ``reports``).
REPORTS = pytest.StashKey[list["Report"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "harness: fault-injection scenarios")
    group.addoption(
        "--harness-seed",
        dest="harness_seed",
        type=int,
        default=None,
        metavar="N",
        help="seed every scenario (items and harness_cluster) with N; default: each "
        "scenario's own seed, else a fresh one. ini: harness_seed",
    )
    group.addoption(
        "--toxiproxy",
        dest="harness_toxiproxy",
        default=None,
        metavar="HOST:PORT",
        help="drive this real Toxiproxy server; default: a fresh embedded proxy per "
        "scenario. ini: harness_toxiproxy",
    )
    group.addoption(
        "--harness-report",
        dest="harness_report",
        default=None,
        metavar="DIR",
        help="write junit.xml and report.html of the scenario items to DIR at the end. "
        "ini: harness_report",
    )
    group.addoption(
        "--harness-backend",
        dest="harness_backend",
        default=None,
        metavar="NAME",
        help="run every scenario on this backend (static, torch-static, torch-c10d or "
        "module:factory); "
        "default: each scenario's own. ini: harness_backend",
    )
    group.addoption(
        "--harness-pack",
        dest="harness_pack",
        default=None,
        metavar="K",
        help="run every scenario with nodes 1..N-1 packed K (>= 2) per process as threads; "
        "default: each scenario's own pack key. ini: harness_pack",
    )
    group.addoption(
        "--harness-world",
        dest="harness_world",
        default=None,
        metavar="NAME",
        help="run every scenario in this world: local, netns (a network namespace per node; "
        "needs root and nft) or ray; default: each scenario's own world key. "
        "ini: harness_world",
    )
    group.addoption(
        "--harness-ray-address",
        dest="harness_ray_address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster of the ray world (as `ray start --head` printed it, or auto); "
        "default: a local Ray bound to 127.0.0.1 for the session. ini: harness_ray_address",
    )
    parser.addini("harness_seed", "seed for every scenario (as --harness-seed)", default="")
    parser.addini("harness_world", "world for every scenario (as --harness-world)", default="")
    parser.addini(
        "harness_ray_address", "Ray cluster of the ray world (as --harness-ray-address)", default=""
    )
    parser.addini(
        "harness_pack", "nodes per process for every scenario (as --harness-pack)", default=""
    )
    parser.addini(
        "harness_backend", "backend for every scenario (as --harness-backend)", default=""
    )
    parser.addini("harness_toxiproxy", "HOST:PORT of a real Toxiproxy (as --toxiproxy)", default="")
    parser.addini(
        "harness_report", "directory for scenario reports (as --harness-report)", default=""
    )
    parser.addini(
        "harness_scenarios",
        "globs (relative to the rootdir) of scenario files to collect",
        type="args",
        default=[DEFAULT_GLOB],
    )


def parse_toxiproxy_address(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``http://HOST:PORT`` -> ``(host, port)``.

    Raises:
        pytest.UsageError: naming ``where`` (the option or ini key) and the bad value.
    """
    from harness.proxy.address import parse_api_address

    try:
        return parse_api_address(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from exc


def seed_override(config: pytest.Config) -> tuple[int | None, str]:
    """The seed override and where it came from (``""`` when there is none)."""
    cli: int | None = config.getoption("harness_seed")
    if cli is not None:
        return cli, "--harness-seed"
    raw = str(config.getini("harness_seed")).strip()
    if not raw:
        return None, ""
    try:
        return int(raw), "ini harness_seed"
    except ValueError:
        raise pytest.UsageError(f"ini harness_seed: expected a whole number, got {raw!r}") from None


def _given(config: pytest.Config, dest: str, flag: str) -> tuple[str, str]:
    """The raw value of option ``flag`` (``dest``), else of its ini twin ``dest`` (stripped;
    ``""`` when neither is set), and which of the two it came from."""
    cli: str | None = config.getoption(dest)
    if cli is not None:
        return cli, flag
    return str(config.getini(dest)).strip(), f"ini {dest}"


def backend_override(config: pytest.Config) -> str | None:
    """The backend override (``None``: each scenario's own)."""
    raw, where = _given(config, "harness_backend", "--harness-backend")
    if not raw:
        return None
    from harness.scenario.model import backend_name

    try:
        return backend_name(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from exc


def pack_override(config: pytest.Config) -> int | None:
    """The pack override (``None``: each scenario's own)."""
    raw, where = _given(config, "harness_pack", "--harness-pack")
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 2:
        raise pytest.UsageError(f"{where}: expected a whole number of at least 2, got {raw!r}")
    return int(raw)


def world_override(config: pytest.Config) -> str | None:
    """The world override (``None``: each scenario's own)."""
    raw, where = _given(config, "harness_world", "--harness-world")
    if not raw:
        return None
    from harness.scenario.model import WORLDS

    if raw not in WORLDS:
        raise pytest.UsageError(f"{where}: expected one of {', '.join(WORLDS)}, got {raw!r}")
    return raw


def ray_address(config: pytest.Config) -> str | None:
    """The Ray cluster of the ray world (``None``: a local one for the session)."""
    raw, _ = _given(config, "harness_ray_address", "--harness-ray-address")
    return raw or None


def overrides(config: pytest.Config) -> dict[str, Any]:
    """What the options override in every scenario: its backend, its pack, its world (all
    valid)."""
    found = {
        "backend": backend_override(config),
        "pack": pack_override(config),
        "world": world_override(config),
    }
    return {key: value for key, value in found.items() if value is not None}


def toxiproxy_address(config: pytest.Config) -> tuple[str, int] | None:
    """The real Toxiproxy server to drive (``None``: an embedded proxy per scenario)."""
    cli: str | None = config.getoption("harness_toxiproxy")
    if cli is not None:
        return parse_toxiproxy_address(cli, "--toxiproxy")
    raw = str(config.getini("harness_toxiproxy")).strip()
    return parse_toxiproxy_address(raw, "ini harness_toxiproxy") if raw else None


def report_dir(config: pytest.Config) -> Path | None:
    """Where the scenario reports go (``None``: not written)."""
    cli: str | None = config.getoption("harness_report")
    raw = cli if cli is not None else str(config.getini("harness_report")).strip()
    if not raw:
        return None
    return Path(config.invocation_params.dir, raw) if cli is not None else config.rootpath / raw


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a scenario file collected by the harness plugin")
    seed_override(config)  # fail at start-up, not per item, on a bad seed, address or backend
    toxiproxy_address(config)
    backend_override(config)
    pack_override(config)
    world_override(config)
    config.stash[REPORTS] = []


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed, origin = seed_override(config)
    if seed is not None:
        policy = f"harness: seed {seed} for every scenario ({origin})"
    else:
        policy = (
            "harness: seed: each scenario's own, else a fresh random one per run "
            "(shown on failure; override with --harness-seed N)"
        )
    address = toxiproxy_address(config)
    proxy = f"toxiproxy {address[0]}:{address[1]}" if address else "embedded toxiproxy per run"
    globs = " ".join(config.getini("harness_scenarios"))
    backend = backend_override(config) or "each scenario's own"
    world = world_override(config) or "each scenario's own"
    return [policy, f"harness: scenarios {globs}; {proxy}; backend {backend}; world {world}"]
