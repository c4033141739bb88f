"""Which world runs a scenario, and whether it can do what the scenario's faults need.

:func:`worlds_for` picks the world from the scenario (``world``, ``pack``); the runner asks
:func:`check_supported` before anything starts, so a fault the world cannot carry out makes
the run *unsupported* (saying which world could), never a half-run.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import UnsupportedError
from harness.proxy.client import ToxiproxyClient
from harness.scenario.faults.base import Fault
from harness.scenario.model import Scenario
from harness.world.base import WorldFactory, cannot, missing
from harness.world.local import LOCAL_CAPABILITIES, LocalWorlds
from harness.world.netns.world import NETNS_CAPABILITIES, NetnsWorlds
from harness.world.packed import PackedWorlds

__all__ = ["capabilities_of", "check_supported", "worlds_for"]

#: What each world can do, to say which one could run a scenario its world cannot.
_CAPABLE = {"local": LOCAL_CAPABILITIES, "netns": NETNS_CAPABILITIES}


def capabilities_of(world: str) -> frozenset[str]:
    """What the world named ``world`` can do, for a caller that makes scenarios for it
    (``harness fuzz --world``).

    Raises:
        ValueError: ``world`` is not ``local`` or ``netns`` (the Ray world's capabilities
            are its cluster's, known once it is connected).
    """
    if world not in _CAPABLE:
        known = " or ".join(map(repr, _CAPABLE))
        raise ValueError(f"no capabilities known for the {world!r} world; choose {known}")
    return _CAPABLE[world]


def worlds_for(scenario: Scenario, client: ToxiproxyClient) -> WorldFactory:
    """The world a scenario runs in, its links on ``client``'s proxy: a process per node,
    or packed ``scenario.pack`` nodes per process; the netns world (its own proxy); or,
    for ``world = "ray"``, Ray actors (on the Ray this process is connected to, else a
    local one for the run).

    Raises:
        UnsupportedError: the scenario asks for packed nodes in the netns world, or for the
            Ray world where Ray is not installed.
    """
    if scenario.world == "netns":
        if scenario.pack is not None:
            raise UnsupportedError(
                f"the netns world runs one process per node (its own namespace), but the "
                f"scenario packs {scenario.pack} per process: drop 'pack' or run it locally",
                world="netns",
                capability="pack",
            )
        return NetnsWorlds()
    if scenario.world == "ray":
        from harness.world.ray.session import unavailable

        why = unavailable()
        if why is not None:
            raise UnsupportedError(why, world="ray", capability="ray")
        from harness.world.ray.world import RayWorlds

        return RayWorlds(scenario.pack)
    if scenario.pack is not None:
        return PackedWorlds(client, scenario.pack)
    return LocalWorlds(client)


def check_supported(worlds: WorldFactory, faults: Sequence[tuple[int, Fault]]) -> None:
    """Check that ``worlds`` can do what every fault needs.

    Raises:
        UnsupportedError: a fault needs something the world cannot do (the error names a
            world that can, where one does).
    """
    for index, fault in faults:
        lacking = missing(worlds.capabilities, fault.needs)
        if lacking:
            why = f"fault[{index}] is a {fault.kind} fault"
            able = [n for n, can in _CAPABLE.items() if n != worlds.name and lacking[0] in can]
            if able:
                why += f"; the {able[0]} world can (world = {able[0]!r}, or --world {able[0]})"
            raise cannot(worlds.name, lacking[0], why)
