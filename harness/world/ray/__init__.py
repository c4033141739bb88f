"""The Ray world: a run's nodes as Ray actors, packed, spread over a cluster's hosts.

* ``session``  join a Ray cluster or start a local Ray bound to 127.0.0.1; whether Ray is
               installed at all (it is the optional ``ray`` extra)
* ``kind``     its description for the registry (imports nothing of Ray);
               ``capabilities``: its name and what it can do
* ``world``    :class:`~harness.world.ray.world.RayWorld` and its factory
               :class:`~harness.world.ray.world.RayWorlds`: placement group, actors, verbs
* ``groups``   which nodes share an actor (node starts: ``harness.world.incarnations``)
* ``pump``     the thread that brings the nodes' messages home (a long poll per actor)
* ``network``  a proxy agent per host, each node's link on it (toxics, link down)
* ``actors``   what runs inside Ray: a node group (packed nodes) and a host's proxy agent
* ``waits``    the world's waits on Ray, cut short when the run is stopped (Ctrl-C)
* ``steps``    the start-up steps, announced on stderr with ``HARNESS_RAY_STEPS=1``

Importing this package imports nothing of Ray; :mod:`~harness.world.ray.world` does. Its
actors run :mod:`harness.world.process.packed`; its links are
:mod:`harness.world.proxied.links` on an agent per host. Imports: the top of
:mod:`harness.world`, its ``process`` and ``proxied`` rooms, :mod:`harness.proxy`,
:mod:`harness.errors`; never another world.
"""
