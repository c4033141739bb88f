"""The packed world: node 0 a process, the other nodes K per process as threads.

* ``world``  :class:`~harness.world.packed.world.PackedWorld` and its factory (the local
             world's network; kill, pause and restart of a packed node emulated)
* ``node``   a packed process: its node threads, their sockets, events, faults and start
             gate (also what a Ray actor runs: :func:`~harness.world.process.packed.host`)

Imports: :mod:`harness.world.local` (its network), the shared parts of :mod:`harness.world`,
:mod:`harness.proxy`, :mod:`harness.errors`, rdzv.
"""

from harness.world.packed.world import HOLD_MS, PAUSE_TOXIC, PackedWorld, PackedWorlds, placement

__all__ = ["HOLD_MS", "PAUSE_TOXIC", "PackedWorld", "PackedWorlds", "placement"]
