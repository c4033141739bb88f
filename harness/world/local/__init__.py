"""The local world: every node an OS process on this machine, links through the fault proxy.

* ``world``     :class:`~harness.world.local.world.LocalWorld` and its factory
* ``kind``      its description for the registry that admits scenarios
                (:mod:`harness.run.worlds`)
* ``topology``  its network: node 0's port, one proxy link per node, DNS shims, the
                store-fault interposer

Its nodes run on :mod:`harness.world.process`, its links and store rules on
:mod:`harness.world.proxied`. The packed world (:mod:`harness.world.packed`) builds on this
one. Imports: the top of :mod:`harness.world`, its ``process`` and ``proxied`` rooms,
:mod:`harness.proxy`, :mod:`harness.errors`, rdzv.
"""

from harness.world.local.world import LOCAL_CAPABILITIES, NO_EVENT_LOG, LocalWorld, LocalWorlds

__all__ = ["LOCAL_CAPABILITIES", "NO_EVENT_LOG", "LocalWorld", "LocalWorlds"]
