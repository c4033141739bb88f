"""What stands on the network between the nodes and the store: proxies and impostors.

* ``links``         toxics and downed links on proxied links (local, netns, ray): putting
                    a toxic on, removal, effects and cuts read from the proxy's event log
* ``store_faults``  an interposer that decodes TCPStore requests and applies store rules
                    (the only module here that reads rdzv's wire codec)
* ``squatters``     listeners that hold node 0's port (bind faults)

Imports: the top of :mod:`harness.world` (the protocol), :mod:`harness.proxy`,
:mod:`harness.errors`, rdzv; nothing of the node processes (:mod:`harness.world.process`)
or of any world.
"""
