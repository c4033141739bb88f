"""The local world: every node an OS process on this machine, links through the fault proxy.

* ``world``     :class:`~harness.world.local.world.LocalWorld` and its factory
* ``topology``  its network: node 0's port, one proxy link per node, DNS shims, the
                store-fault interposer

The leak check every world's teardown uses is shared: :mod:`harness.world.process.leaks`. The
packed world (:mod:`harness.world.packed`) builds on this one. Imports: the shared parts of
:mod:`harness.world`, :mod:`harness.proxy`, :mod:`harness.errors`, rdzv.
"""

from harness.world.local.world import LOCAL_CAPABILITIES, NO_EVENT_LOG, LocalWorld, LocalWorlds

__all__ = ["LOCAL_CAPABILITIES", "NO_EVENT_LOG", "LocalWorld", "LocalWorlds"]
