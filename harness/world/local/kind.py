"""The local world's description for the registry (:mod:`harness.run.worlds`)."""

from __future__ import annotations

from harness.proxy.client import ToxiproxyClient
from harness.world.kinds import WorldKind
from harness.world.local.world import LOCAL_CAPABILITIES, NAME, LocalWorlds

__all__ = ["KIND"]


def _make(pack: int | None, client: ToxiproxyClient | None) -> LocalWorlds:
    assert client is not None, "the local world's links are on the run's proxy"
    return LocalWorlds(client)


#: A process per node on this machine, links on the run's Toxiproxy API; runs anywhere.
#: Nodes packed K per process are the packed world's (:mod:`harness.world.packed.kind`).
KIND = WorldKind(NAME, NAME, LOCAL_CAPABILITIES, _make, proxied=True)
