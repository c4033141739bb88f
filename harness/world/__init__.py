"""Worlds: where the nodes of a run live and how faults reach them.

* ``base``          the :class:`~harness.world.base.World` protocol: its verbs, the layout
                    it builds, what a node launches, capabilities, the messages coming back
* ``local``         :class:`~harness.world.local.LocalWorld`: OS processes on this machine,
                    links through the embedded (or a real) Toxiproxy; the default
* ``cluster``       the local world's node processes (forkserver): start, signal, reap
* ``topology``      the local world's network: node 0's port, proxy links, DNS, interposer
* ``netns``         :class:`~harness.world.netns.world.NetnsWorld`: a network namespace per
                    node on a bridge, faults as nft rules and ``tbf`` in the kernel
* ``packed``        :class:`~harness.world.packed.PackedWorld`: node 0 a process, the others
                    K per process as threads; kill, pause and restart emulated
* ``packed_node``   a packed process: node threads, their sockets, events and faults
* ``ray``           (subpackage) the Ray world: node groups as Ray actors on a cluster,
                    a proxy agent per host (the optional ``ray`` extra)
* ``node``          the node process: one rendezvous, its events, one outcome
* ``backends``      the rendezvous a node runs: rdzv static, torch-static, module:factory
* ``dns``           the DNS shim a node process installs (a name that stops resolving)
* ``squatters``     listeners that hold node 0's port (bind faults)
* ``store_faults``  an interposer that decodes TCPStore requests and applies store rules

Imports: :mod:`harness.proxy`, :mod:`harness.errors`, rdzv. A world knows nothing of scenario
files, fault kinds, runs or reports. Every world implements the same protocol; see
docs/architecture.md.
"""
