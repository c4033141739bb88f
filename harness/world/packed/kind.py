"""The packed world's description for the registry (:mod:`harness.run.worlds`)."""

from __future__ import annotations

from harness.proxy.client import ToxiproxyClient
from harness.world.kinds import WorldKind
from harness.world.packed.world import NAME, PACKED_CAPABILITIES, PackedWorlds

__all__ = ["KIND"]


def _make(pack: int | None, client: ToxiproxyClient | None) -> PackedWorlds:
    assert client is not None, "the packed world's links are on the run's proxy"
    assert pack is not None, "the packed world runs K nodes per process: pack is K"
    return PackedWorlds(client, pack)


#: ``world = "local"`` with ``pack``: the local world's network, nodes K per process.
KIND = WorldKind(NAME, "local", PACKED_CAPABILITIES, _make, proxied=True)
