"""Worlds: where the nodes of a run live and how faults reach them.

At the top, what every world shares and nothing of how any world works:

* ``base``          the :class:`~harness.world.base.World` protocol: its verbs, the handles
                    they return, what a node launches, capabilities
* ``messages``      what comes back from the nodes: typed, picklable messages (``Ready``,
                    ``Started``, ``Event``, ``Outcome``, ``Exit``), each of a node or one
                    of its parts
* ``specs``         what the runner hands a world: plain values (``Layout``, ``Launch``,
                    ``ToxicSpec``, ``PacketRule``, ``StoreRule``)
* ``kinds``         how a world describes itself to the one registry that admits scenarios
                    (:mod:`harness.run.worlds`): each world package's ``kind`` module
* ``incarnations``  which incarnation of each node is live (one at a time): the kill, pause
                    and resume bookkeeping of the packed and the Ray world

The rooms below it, each a subpackage:

* ``process``  node processes on this machine: the cluster (forkserver), the node entry,
               packed processes (nodes as threads), backends, DNS shim, leak check
* ``proxied``  what stands between nodes and store: proxied links (toxics, link down), the
               store-fault interposer, squatters
* ``local``    :class:`~harness.world.local.LocalWorld`: OS processes on this machine, links
               through the embedded (or a real) Toxiproxy; the default
* ``packed``   :class:`~harness.world.packed.PackedWorld`: node 0 a process, the others K
               per process as threads; kill, pause and restart emulated
* ``netns``    :class:`~harness.world.netns.world.NetnsWorld`: a network namespace per node
               on a bridge, faults as nft rules and ``tbf`` in the kernel
* ``ray``      the Ray world: node groups as Ray actors on a cluster, a proxy agent per host
               (the optional ``ray`` extra)

The top imports no room; ``process`` and ``proxied`` import only the top; a world imports
the top, ``process`` and ``proxied`` (the packed world: also ``local``, whose network it
uses). Imports: :mod:`harness.proxy`, :mod:`harness.errors`, rdzv. A world knows nothing of
scenario files, fault kinds, runs or reports. See docs/architecture.md.
"""
