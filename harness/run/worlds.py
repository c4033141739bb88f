"""The one registry that admits a scenario: the world it runs in, or why it is skipped. Every
world package describes itself once (:class:`~harness.world.kinds.WorldKind`, in its ``kind``
module); this module reads those descriptions and is the only place that decides whether a
scenario can run here. :func:`admit` says, before anything starts (no proxy, no process), which
world runs a scenario or why it is skipped: its backend cannot run it, the world cannot pack
nodes, a fault needs what the world lacks (naming a world that could), or the world cannot run
on this machine; a scenario with ``[job]`` also needs a world that runs jobs (``jobs``) and a
torchrun backend with torch installed. :func:`check_supported` is the fault and job check alone
(the runner asks it again of any factory it is handed); :func:`worlds_for` makes a scenario's
factory; :func:`worlds_session` and :func:`open_session` open what a suite of scenarios in one
world shares (Ray, connected once). ``harness run``, the fuzzer and the pytest plugin's items
and ``harness_cluster`` fixture all come through here (:func:`harness.run.one.run_one`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping, Sequence
from dataclasses import dataclass

from harness.errors import HarnessError, UnsupportedError
from harness.proxy.client import ToxiproxyClient
from harness.scenario.faults.base import Fault
from harness.scenario.model import Scenario
from harness.world.base import JOBS, WorldFactory, cannot, missing
from harness.world.kinds import Closeable, WorldKind
from harness.world.local.kind import KIND as LOCAL
from harness.world.netns.kind import KIND as NETNS
from harness.world.packed.kind import KIND as PACKED
from harness.world.process.backends import TORCH_STATIC
from harness.world.process.backends import unavailable as backend_unavailable
from harness.world.process.jobs.agent import TORCHRUN_BACKENDS
from harness.world.ray.kind import KIND as RAY

__all__ = [
    "KINDS",
    "Admission",
    "WorldUnreachable",
    "admit",
    "capabilities_of",
    "check_supported",
    "kind_of",
    "open_session",
    "worlds_for",
    "worlds_session",
]

#: Every world, by the name of the worlds it makes.
KINDS: dict[str, WorldKind] = {kind.name: kind for kind in (LOCAL, PACKED, NETNS, RAY)}
#: What each world a scenario can name can do, to say which one could run a scenario its
#: world cannot.
_CAPABLE = {kind.name: kind.capabilities for kind in KINDS.values() if kind.world == kind.name}


class WorldUnreachable(HarnessError):
    """The world scenarios asked for could not be reached (Ray not started or joined)."""


@dataclass(frozen=True)
class Admission:
    """Where a scenario runs, or why it is skipped.

    Attributes:
        kind: the world that runs it.
        skipped: why it is not run (None: it runs).
        by_world: the world that cannot run it, when that is why (None: its backend).
    """

    kind: WorldKind
    skipped: str | None = None
    by_world: str | None = None


def kind_of(scenario: Scenario) -> WorldKind:
    """The world ``scenario`` names (``world``), packed when it says ``pack`` and its world
    packs nodes in another (the local world's packed nodes are the packed world)."""
    if scenario.world == LOCAL.name and scenario.pack is not None:
        return PACKED
    return KINDS[scenario.world]


#: The worlds whose capabilities a caller that makes scenarios may plan with (the Ray
#: world's are its cluster's, known once it is connected).
_PLANNED = ("local", "netns")


def capabilities_of(world: str) -> frozenset[str]:
    """What the world named ``world`` can do, for a caller that makes scenarios for it
    (``harness fuzz --world``).

    Raises:
        ValueError: ``world`` is not ``local`` or ``netns`` (the Ray world's capabilities
            are its cluster's, known once it is connected).
    """
    if world not in _PLANNED:
        known = " or ".join(map(repr, _PLANNED))
        raise ValueError(f"no capabilities known for the {world!r} world; choose {known}")
    return KINDS[world].capabilities


def admit(scenario: Scenario) -> Admission:
    """Whether ``scenario`` can run here, and in which world; nothing is started."""
    kind = kind_of(scenario)
    # What the file asks that cannot be done anywhere first, then what this machine lacks.
    why_not = scenario.variant.unsupported or _job_backend(scenario)
    if why_not is not None:
        return Admission(kind, why_not)
    try:
        _check_packs(kind, scenario.pack)
        check_supported(kind, list(enumerate(scenario.fault)), job=scenario.job is not None)
    except UnsupportedError as exc:
        return Admission(kind, str(exc), exc.world)
    why_not = _job_torch(scenario) or backend_unavailable(scenario.backend)
    if why_not is not None:
        return Admission(kind, why_not)
    why = kind.unavailable()
    if why is not None:
        return Admission(kind, why, kind.name)
    return Admission(kind)


def worlds_for(scenario: Scenario, client: ToxiproxyClient | None) -> WorldFactory:
    """The factory of the world ``scenario`` runs in, its links on ``client``'s proxy when
    the world's links are on the run's proxy (:attr:`~harness.world.kinds.WorldKind.proxied`).

    Raises:
        UnsupportedError: the world cannot pack nodes, or cannot run on this machine.
    """
    kind = kind_of(scenario)
    _check_packs(kind, scenario.pack)
    why = kind.unavailable()
    if why is not None:
        raise UnsupportedError(why, world=kind.name, capability=kind.name)
    return kind.make(scenario.pack, client if kind.proxied else None)


def _check_packs(kind: WorldKind, pack: int | None) -> None:
    if pack is not None and isinstance(kind.packs, str):
        raise UnsupportedError(kind.packs.format(pack=pack), world=kind.name, capability="pack")


def _job_backend(scenario: Scenario) -> str | None:
    """Why ``scenario``'s backend cannot run its ``[job]`` (None: it can, or no job)."""
    if scenario.job is None:
        return None
    if scenario.backend not in TORCHRUN_BACKENDS:
        allowed = ", ".join(repr(name) for name in TORCHRUN_BACKENDS)
        return (
            f"a job runs on a torchrun rendezvous backend ({allowed}), not "
            f"{scenario.backend!r}: run it with --backend one of these"
        )
    return None


def _job_torch(scenario: Scenario) -> str | None:
    """Why this machine cannot run ``scenario``'s ``[job]`` (None: it can, or no job)."""
    if scenario.job is None:
        return None
    why = backend_unavailable(TORCH_STATIC)  # torch's agent and workers, on every backend
    return None if why is None else f"a job runs torch's agent and workers: {why}"


def check_supported(
    worlds: WorldFactory | WorldKind, faults: Sequence[tuple[int, Fault]], *, job: bool = False
) -> None:
    """Check that ``worlds`` can do what every fault needs, and run jobs if ``job``.

    Raises:
        UnsupportedError: a fault (or the job) needs something the world cannot do (the
            error names a world that can, where one does).
    """
    needs = [("the scenario has a [job] table", frozenset({JOBS}))] if job else []
    needs += [(f"fault[{index}] is a {fault.kind} fault", fault.needs) for index, fault in faults]
    for what, need in needs:
        lacking = missing(worlds.capabilities, need)
        if lacking:
            able = [n for n, can in _CAPABLE.items() if n != worlds.name and lacking[0] in can]
            hint = "".join(f"; the {n} world can (world = {n!r}, or --world {n})" for n in able[:1])
            raise cannot(worlds.name, lacking[0], what + hint)


def open_session(
    scenario: Scenario, address: str | None, sessions: MutableMapping[str, Closeable]
) -> None:
    """Open the session of ``scenario``'s world into ``sessions`` (by world name) unless one
    is open or the world needs none; a world that cannot run here opens none (its
    scenarios are skipped, saying why).

    Raises:
        WorldUnreachable: the session could not be opened (Ray not started or joined).
    """
    kind = kind_of(scenario)
    if kind.session is None or kind.name in sessions or kind.unavailable() is not None:
        return
    try:
        sessions[kind.name] = kind.session(address)
    except HarnessError as exc:
        raise WorldUnreachable(f"--world {kind.name}: {exc}") from exc


@contextlib.contextmanager
def worlds_session(scenarios: Sequence[Scenario], address: str | None) -> Iterator[None]:
    """What the scenarios' worlds need for a whole suite, open while it runs: Ray, connected
    once (not per scenario) when one runs in the ray world -- a local Ray started here is
    stopped at the end, also on Ctrl-C.

    Raises:
        WorldUnreachable: Ray could not be started, or its cluster joined.
    """
    sessions: dict[str, Closeable] = {}
    try:
        for scenario in scenarios:
            open_session(scenario, address, sessions)
        yield
    finally:
        for session in sessions.values():
            session.close()
