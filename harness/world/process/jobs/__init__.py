"""Jobs: a node that is a torchrun agent with gloo workers (issue 27).

* ``spec``     :class:`~harness.world.process.jobs.spec.JobSpec` (what a job node runs; picklable),
               the stages and part names
* ``stages``   the node's end of its workers' stage reports: a datagram socket the
               workers write to, read by a thread that hands each stage on
* ``worker``   the worker: a script run by torch's agent (not imported by the harness):
               ends with its agent, reports its stages, runs the default all-reduce or
               the user's script
* ``agent``    the agent: torch's ``LocalElasticAgent`` reporting its own stages, and
               the ``LaunchConfig`` for the node's backend, rank, endpoint and listen fd
* ``run``      :func:`~harness.world.process.jobs.run.run_job`: the agent in the node process,
               its stages streamed, one :class:`~harness.world.process.jobs.spec.JobResult`

torch is imported by ``agent`` and ``run`` only, inside the node process.
Imports: rdzv, :mod:`harness.world.process.torch_backends`; never the scenario format or the runner.
"""
