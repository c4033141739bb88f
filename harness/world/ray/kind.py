"""The Ray world's description for the registry (:mod:`harness.run.worlds`).

Importing it imports nothing of Ray: the factory and the session are imported when used.
"""

from __future__ import annotations

from harness.proxy.client import ToxiproxyClient
from harness.world.base import WorldFactory
from harness.world.kinds import Closeable, WorldKind
from harness.world.ray.capabilities import CAPS, NAME
from harness.world.ray.session import unavailable

__all__ = ["KIND"]


def _make(pack: int | None, client: ToxiproxyClient | None) -> WorldFactory:
    from harness.world.ray.world import RayWorlds

    return RayWorlds(pack)


def _session(address: str | None) -> Closeable:
    from harness.world.ray.session import connect

    return connect(address)


#: Ray actors on a cluster (joined at ``address``, else a local Ray), connected once per
#: suite; a proxy agent per host, so a run is handed no proxy.
KIND = WorldKind(NAME, NAME, CAPS, _make, unavailable=unavailable, session=_session)
