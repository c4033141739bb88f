"""pytest plugin: scenario files as test items, the harness's options, and its fixtures.

Registered as the ``pytest11`` entry point ``harness`` (active once the package is
installed; otherwise pass ``-p harness.pytest_plugin``). See docs/pytest.md.

* Every file matching the ini glob ``harness_scenarios`` (default ``scenarios/**/*.toml``,
  relative to the rootdir), and any ``.toml`` file named on the command line, is collected
  as one item per file, marked ``harness_scenario``.
  An invalid file is a collection error naming the file and its bad keys; a failing item
  shows the failed checks, each node's outcome, the seed and the command that replays it.
* Options (group "harness"), each with an ini twin: ``--harness-seed`` / ``harness_seed``,
  ``--toxiproxy`` / ``harness_toxiproxy``, ``--harness-report`` / ``harness_report``,
  ``--harness-backend`` / ``harness_backend`` (run every scenario on that backend; a
  scenario it cannot run on — ``[backends.<name>] unsupported``, torch missing — is skipped
  with the reason), ``--harness-pack`` / ``harness_pack`` (run every scenario with its nodes
  packed K per process as threads, see docs/scenarios.md "Packed nodes"),
  ``--harness-world`` / ``harness_world`` (run every scenario in that world: ``local`` or
  ``netns`` or ``ray``; a scenario the world cannot carry out is skipped with the reason)
  and ``--harness-ray-address`` / ``harness_ray_address`` (the Ray cluster of the ray
  world; default a local Ray bound to 127.0.0.1, started once for the session at the first
  scenario that needs it and stopped at the end, see docs/cluster.md).
* Fixtures: ``toxiproxy`` (a typed client on a fault proxy), ``rdzv_store`` (a live TCPStore
  master), ``harness_cluster`` (runs a scenario built in Python, returns its report).

Only pytest and the standard library are imported here at start-up: the runner, aiohttp,
multiprocess and pydantic are imported when a scenario file is collected or run, or a
fixture is used, so the plugin costs nothing in unrelated test runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from harness.proxy.client import ToxiproxyClient
    from harness.run.model import Report
    from harness.scenario.model import Scenario
    from rdzv import TCPStore

__all__ = [
    "HarnessCluster",
    "ScenarioFailed",
    "ScenarioFile",
    "ScenarioItem",
    "harness_cluster",
    "parse_toxiproxy_address",
    "rdzv_store",
    "toxiproxy",
]

MARKER = "harness_scenario"
DEFAULT_GLOB = "scenarios/**/*.toml"
_REPORTS = pytest.StashKey[list["Report"]]()
_MATCHES = pytest.StashKey[frozenset[Path]]()
_WRITTEN = pytest.StashKey[list[Path]]()
_RAY = pytest.StashKey[Any]()  # the session's Ray connection (a RaySession)

#: ``harness_cluster(...)``: a scenario built in Python (mapping and/or keywords) -> Report.
HarnessCluster = Callable[..., "Report"]


# --- options ---------------------------------------------------------------------------


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
        help="run every scenario on this backend (static, torch-static or module:factory); "
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


def _seed(config: pytest.Config) -> tuple[int | None, str]:
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


def _backend(config: pytest.Config) -> str | None:
    """The backend override (``None``: each scenario's own)."""
    cli: str | None = config.getoption("harness_backend")
    raw = cli if cli is not None else str(config.getini("harness_backend")).strip()
    if not raw:
        return None
    from harness.scenario.model import backend_name

    try:
        return backend_name(raw)
    except ValueError as exc:
        where = "--harness-backend" if cli is not None else "ini harness_backend"
        raise pytest.UsageError(f"{where}: {exc}") from exc


def _pack(config: pytest.Config) -> int | None:
    """The pack override (``None``: each scenario's own)."""
    cli: str | None = config.getoption("harness_pack")
    raw = cli if cli is not None else str(config.getini("harness_pack")).strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 2:
        where = "--harness-pack" if cli is not None else "ini harness_pack"
        raise pytest.UsageError(f"{where}: expected a whole number of at least 2, got {raw!r}")
    return int(raw)


def _world(config: pytest.Config) -> str | None:
    """The world override (``None``: each scenario's own)."""
    cli: str | None = config.getoption("harness_world")
    raw = cli if cli is not None else str(config.getini("harness_world")).strip()
    if not raw:
        return None
    from harness.scenario.model import WORLDS

    if raw not in WORLDS:
        where = "--harness-world" if cli is not None else "ini harness_world"
        raise pytest.UsageError(f"{where}: expected one of {', '.join(WORLDS)}, got {raw!r}")
    return raw


def _ray_address(config: pytest.Config) -> str | None:
    cli: str | None = config.getoption("harness_ray_address")
    raw = cli if cli is not None else str(config.getini("harness_ray_address")).strip()
    return raw or None


def _ray_for(config: pytest.Config, scenario: Scenario) -> None:
    """Connect to Ray once for the session when ``scenario`` runs in the ray world (closed
    in :func:`pytest_unconfigure`); without Ray installed the run is skipped with the
    install command instead."""
    if scenario.world != "ray" or _RAY in config.stash:
        return
    from harness.world.ray.session import connect, unavailable

    if unavailable() is None:
        config.stash[_RAY] = connect(_ray_address(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(_RAY, None)
    if session is not None:
        session.close()


def _overrides(config: pytest.Config) -> dict[str, Any]:
    """What the options override in every scenario: its backend, its pack, its world (all
    valid)."""
    found = {"backend": _backend(config), "pack": _pack(config), "world": _world(config)}
    return {key: value for key, value in found.items() if value is not None}


def _toxiproxy(config: pytest.Config) -> tuple[str, int] | None:
    cli: str | None = config.getoption("harness_toxiproxy")
    if cli is not None:
        return parse_toxiproxy_address(cli, "--toxiproxy")
    raw = str(config.getini("harness_toxiproxy")).strip()
    return parse_toxiproxy_address(raw, "ini harness_toxiproxy") if raw else None


def _report_dir(config: pytest.Config) -> Path | None:
    cli: str | None = config.getoption("harness_report")
    raw = cli if cli is not None else str(config.getini("harness_report")).strip()
    if not raw:
        return None
    return Path(config.invocation_params.dir, raw) if cli is not None else config.rootpath / raw


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: a scenario file collected by the harness plugin")
    _seed(config)  # fail at start-up, not per item, on a bad seed, address or backend
    _toxiproxy(config)
    _backend(config)
    _pack(config)
    _world(config)
    config.stash[_REPORTS] = []


def pytest_report_header(config: pytest.Config) -> list[str]:
    seed, origin = _seed(config)
    if seed is not None:
        policy = f"harness: seed {seed} for every scenario ({origin})"
    else:
        policy = (
            "harness: seed: each scenario's own, else a fresh random one per run "
            "(shown on failure; override with --harness-seed N)"
        )
    address = _toxiproxy(config)
    proxy = f"toxiproxy {address[0]}:{address[1]}" if address else "embedded toxiproxy per run"
    globs = " ".join(config.getini("harness_scenarios"))
    backend = _backend(config) or "each scenario's own"
    world = _world(config) or "each scenario's own"
    return [policy, f"harness: scenarios {globs}; {proxy}; backend {backend}; world {world}"]


# --- collection ------------------------------------------------------------------------


def _matches(config: pytest.Config) -> frozenset[Path]:
    if _MATCHES not in config.stash:
        root = config.rootpath
        found = {p.resolve() for g in config.getini("harness_scenarios") for p in root.glob(g)}
        # a .toml file named on the command line is collected even outside the globs, so
        # `pytest scenarios/scale/x.toml` runs it instead of answering "not found"
        where = config.invocation_params.dir
        named = {(where / arg.split("::")[0]).resolve() for arg in config.args}
        found |= {p for p in named if p.suffix == ".toml"}
        config.stash[_MATCHES] = frozenset(p for p in found if p.is_file())
    return config.stash[_MATCHES]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    if file_path.suffix != ".toml" or file_path.resolve() not in _matches(parent.config):
        return None
    file: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
    return file


class ScenarioFile(pytest.File):
    """One scenario file: yields a single :class:`ScenarioItem`."""

    def collect(self) -> Iterator[ScenarioItem]:
        from harness._launch import INSTALL_HINT, missing

        absent = missing()
        if absent:  # rdzv installed without the harness extra: say so, no import traceback
            raise self.CollectError(
                f"cannot run scenario files: the harness extra is not installed here "
                f"(missing: {', '.join(absent)}); install it with: {INSTALL_HINT}"
            )
        from harness.errors import ScenarioError
        from harness.scenario.load import load

        try:
            scenario = load(self._shown_path())
        except ScenarioError as exc:
            problems = "\n".join(f"  - {p}" for p in exc.problems)
            raise self.CollectError(f"invalid scenario {exc.source}:\n{problems}") from exc
        scenario = scenario.model_copy(update=_overrides(self.config))
        yield ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)

    def _shown_path(self) -> str:
        """The path as the replay command shows it: relative to where pytest ran."""
        here = self.config.invocation_params.dir
        try:
            return str(self.path.relative_to(here))
        except ValueError:
            return os.fspath(self.path)


class ScenarioFailed(AssertionError):
    """A scenario item's run broke a check or an expectation (carries the report)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__(f"scenario {report.scenario.name} failed (seed {report.seed})")


class ScenarioItem(pytest.Item):
    """One run of one scenario, with the session's seed policy and proxy."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.add_marker(MARKER)

    def runtest(self) -> None:
        from harness.run.suite import choose_seed, run_one

        override, _ = _seed(self.config)
        seed = choose_seed(self.scenario, override, lambda: secrets.randbits(32))
        _ray_for(self.config, self.scenario)
        report = run_one(self.scenario, _proxies(self.config), seed)
        self.config.stash[_REPORTS].append(report)
        if report.skipped is not None:
            pytest.skip(f"not run on {self.scenario.backend}: {report.skipped}")
        if not report.passed:
            raise ScenarioFailed(report)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ScenarioFailed):
            from harness.report.failure import failure_text

            return failure_text(excinfo.value.report)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"scenario {self.scenario.name}"


def _proxies(config: pytest.Config) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    from harness.proxy.client import ToxiproxyClient
    from harness.run.suite import embedded_proxy, shared_proxy

    address = _toxiproxy(config)
    if address is None:
        return embedded_proxy
    return shared_proxy(ToxiproxyClient(*address))


# --- reports ---------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    where = _report_dir(config)
    reports = config.stash.get(_REPORTS, [])
    if where is None or not reports:
        return
    import datetime as dt

    from harness.report.html import write_html
    from harness.report.junit import write_junit

    now = dt.datetime.now(dt.UTC)
    where.mkdir(parents=True, exist_ok=True)
    junit, html = where / "junit.xml", where / "report.html"
    write_junit(reports, junit, suite_name="harness", timestamp=f"{now:%Y-%m-%dT%H:%M:%S}")
    write_html(reports, html, generated=f"{now:%Y-%m-%d %H:%M:%S} UTC")
    config.stash[_WRITTEN] = [junit, html]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, [])
    if written:
        terminalreporter.write_line(f"harness: wrote {', '.join(map(str, written))}")


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture
def toxiproxy(pytestconfig: pytest.Config) -> Iterator[ToxiproxyClient]:
    """A typed Toxiproxy client: on the ``--toxiproxy`` server, else a fresh embedded one
    (stopped after the test)."""
    from harness.proxy.client import ToxiproxyClient

    address = _toxiproxy(pytestconfig)
    if address is not None:
        yield ToxiproxyClient(*address)
        return
    from harness.run.suite import embedded_proxy

    with embedded_proxy() as client:
        yield client


@pytest.fixture
def rdzv_store() -> Iterator[TCPStore]:
    """A live rdzv TCPStore master on 127.0.0.1 (port 0; read ``.port``), closed after."""
    from rdzv import TCPStore

    store = TCPStore("127.0.0.1", 0, is_master=True, timeout=30)
    try:
        yield store
    finally:
        store.close()


_NAME_JUNK = re.compile(r"[^a-z0-9._-]+")


@pytest.fixture
def harness_cluster(request: pytest.FixtureRequest) -> HarnessCluster:
    """Run a scenario built in Python and return its :class:`~harness.run.model.Report`.

    Call it with a mapping and/or keyword arguments in the scenario file's shape, e.g.
    ``harness_cluster(nodes=3, fault=[{"kind": "absent", "nodes": [2]}], timeouts=...)``;
    ``name`` and ``description`` default to the test's, ``backend`` to
    ``--harness-backend`` when given. The seed is ``--harness-seed`` when
    given, else the scenario's ``seed`` key, else a fresh one. Each call runs to the end and
    cleans up its processes and proxies, also when it raises.

    The factory raises:
        ScenarioError: the scenario is invalid (names each bad key).
        UnsupportedError: a fault needs what the local world cannot do (nothing ran).
        HarnessError: the proxy could not be started or reached.
    """
    config = request.config
    test = _NAME_JUNK.sub("-", request.node.name.lower()).strip("-._") or "test"

    def run(scenario: Mapping[str, Any] | None = None, /, **fields: Any) -> Report:
        from harness.run.suite import choose_seed
        from harness.scenario.load import parse

        data: dict[str, Any] = {"name": test, "description": f"built by {request.node.nodeid}"}
        data.update(_overrides(config))
        data.update(scenario or {})
        data.update(fields)
        built = parse(data, f"<{request.node.nodeid}>")
        override, _ = _seed(config)
        seed = choose_seed(built, override, lambda: secrets.randbits(32))
        return _run_built(built, seed, config)

    return run


def _run_built(scenario: Scenario, seed: int, config: pytest.Config) -> Report:
    from harness.run.runner import run_scenario, worlds_for

    _ray_for(config, scenario)
    with _proxies(config)() as client:
        report: Report = run_scenario(scenario, worlds_for(scenario, client), seed)
    return report
