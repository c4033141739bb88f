"""Worlds: where the nodes of a run live and how faults reach them.

* ``base``          the :class:`~harness.world.base.World` protocol: its verbs, the layout
                    it builds, what a node launches, capabilities
* ``messages``      what comes back from the nodes: typed, picklable messages (``Ready``,
                    ``Started``, ``Event``, ``Outcome``, ``Exit``), each of a node or one
                    of its parts
* ``local``         (subpackage) :class:`~harness.world.local.LocalWorld`: OS processes on
                    this machine, links through the embedded (or a real) Toxiproxy; the
                    default; its network (``local.topology``) and the leak check
* ``cluster``       node processes (forkserver) of every world on this machine: start,
                    start gate and release, signal, reap
* ``incarnations`` which incarnation of each node is live (one at a time): the
                    bookkeeping of the packed and the Ray world
* ``process_nodes`` the node verbs of a world whose nodes are such processes (local, netns)
* ``proxied``       toxics and downed links on proxied links (local, ray): removal,
                    effects and cuts read from the proxy's event log
* ``netns``         (subpackage) :class:`~harness.world.netns.world.NetnsWorld`: a network
                    namespace per node on a bridge, faults as nft rules and ``tbf`` in the
                    kernel
* ``packed``        (subpackage) :class:`~harness.world.packed.PackedWorld`: node 0 a
                    process, the others K per process as threads (``packed.node``); kill,
                    pause and restart emulated
* ``ray``           (subpackage) the Ray world: node groups as Ray actors on a cluster,
                    a proxy agent per host (the optional ``ray`` extra)
* ``node``          the node process: one rendezvous, its events, one outcome
* ``jobs``          (subpackage) a node that is a torchrun agent with gloo workers: its
                    LaunchConfig per backend, the reporting agent, the worker script, the
                    stages its parts report, each part's result
* ``warm_up``       a node's first step taken before it says ``ready`` (page faults
                    paid before the release)
* ``backends``      the rendezvous a node runs: rdzv static, torch-static, torch-c10d,
                    module:factory (torch's: ``torch_backends``)
* ``dns``           the DNS shim a node process installs (a name that stops resolving)
* ``squatters``     listeners that hold node 0's port (bind faults)
* ``store_faults``  an interposer that decodes TCPStore requests and applies store rules

Imports: :mod:`harness.proxy`, :mod:`harness.errors`, rdzv. A world knows nothing of scenario
files, fault kinds, runs or reports. Every world implements the same protocol; see
docs/architecture.md.
"""
