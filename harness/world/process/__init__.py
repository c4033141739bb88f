"""Node processes on this machine: the machinery every world's nodes run on.

* ``cluster``       node processes (forkserver): start, start gate and release, signal,
                    reap; the pipes their messages come home on
* ``forkserver``    how a node process is launched (no re-import of ``__main__``) and its
                    entry: output to a file, the listening socket handed over, then the node
* ``nodes``         the node verbs of a world whose nodes are such processes (local, netns)
* ``node``          the node's entry: one rendezvous, its events, one outcome; what hosting
                    it means (its own process, or a thread of a packed one)
* ``gate``          the start gate a ready node waits at until the release
* ``reporting``     how a node reports: its channel, rdzv's log events, its output file,
                    an exception's status
* ``packed``        a packed process: several nodes as threads, each with its own sockets,
                    events, faults and start gate (the packed world's processes, and what a
                    Ray actor runs: :func:`~harness.world.process.packed.host`)
* ``warm_up``       a node's first step taken before it says ``ready`` (page faults paid
                    before the release)
* ``shared_store``  after the rendezvous: the proof that every rank got one shared store
* ``backends``      the rendezvous a node runs: rdzv static, torch-static, torch-c10d,
                    module:factory (torch's: ``torch_backends``)
* ``dns``           the DNS shim a node process installs (a name that stops resolving)
* ``jobs``          (subpackage) a node that is a torchrun agent with gloo workers: its
                    LaunchConfig per backend, the reporting agent, the worker script, the
                    stages its parts report, each part's result (entered through
                    ``forkserver.run_entry`` like any node)
* ``leaks``         what a run left behind (processes, ports, threads): every world's check

Imports: the top of :mod:`harness.world` (the protocol), rdzv and the standard library;
nothing of the proxy-based parts (:mod:`harness.world.proxied`) or of any world.
"""
