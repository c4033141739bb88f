"""The netns world: every node its own network namespace, faults in the kernel.

* ``kind``     its description for the registry (why this machine cannot host it)
* ``world``    :class:`~harness.world.netns.world.NetnsWorld` and its factory
* ``network``  the namespaces, the bridge, the veths and the addresses of one run
* ``configure`` each node's addresses, links and neighbours, set from one thread (setns)
* ``rules``    nft packet rules (drop, reject, loss, partition, filter) and ``tbf`` limits
* ``links``    proxy links and the store interposer, their sockets in node 0's namespace
* ``enter``    setns(2) through libc, and the node entry point (a forkserver child)
* ``naming``   names tagged with the harness's PID and the run, addresses, dead runs' leftovers
* ``shell``    running ``ip``/``nft``/``tc``; what this machine can do

Imports the node processes (:mod:`harness.world.process`: ``cluster``, ``node``, ``dns``),
the proxy-based parts (:mod:`harness.world.proxied`: ``links``, ``store_faults``) and the
embedded proxy; nothing of scenarios or runs, nor of another world.
Nothing is imported here, so the forkserver's preload of ``enter`` stays light.
"""
