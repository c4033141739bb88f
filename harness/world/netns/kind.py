"""The netns world's description for the registry (:mod:`harness.run.worlds`).

Imported by the registry only, never by the package (whose forkserver preload stays light).
"""

from __future__ import annotations

from harness.proxy.client import ToxiproxyClient
from harness.world.kinds import WorldKind
from harness.world.netns.shell import why_not
from harness.world.netns.world import NAME, NETNS_CAPABILITIES, NetnsWorlds

__all__ = ["KIND"]


def _make(pack: int | None, client: ToxiproxyClient | None) -> NetnsWorlds:
    return NetnsWorlds()


#: A namespace per node, needing root and nft here; it starts its own proxy links when a
#: fault needs them, so a run is handed none.
KIND = WorldKind(
    NAME,
    NAME,
    NETNS_CAPABILITIES,
    _make,
    unavailable=why_not,
    packs=(
        "the netns world runs one process per node (its own namespace), but the scenario "
        "packs {pack} per process: drop 'pack' or run it locally"
    ),
)
