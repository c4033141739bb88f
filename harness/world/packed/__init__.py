"""The packed world: node 0 a process, the other nodes K per process as threads.

* ``world``  :class:`~harness.world.packed.world.PackedWorld` and its factory (the local
             world's network; kill, pause and restart of a packed node emulated)
* ``kind``   its description for the registry (``world = "local"`` with ``pack``)

Its processes run :mod:`harness.world.process.packed` (node threads; the Ray world's actors
run the same); which incarnation of a node is live is :mod:`harness.world.incarnations`.
Imports: :mod:`harness.world.local` (its network), the top of :mod:`harness.world`, its
``process`` and ``proxied`` rooms, :mod:`harness.proxy`, :mod:`harness.errors`, rdzv.
"""

from harness.world.packed.world import HOLD_MS, PAUSE_TOXIC, PackedWorld, PackedWorlds, placement

__all__ = ["HOLD_MS", "PAUSE_TOXIC", "PackedWorld", "PackedWorlds", "placement"]
