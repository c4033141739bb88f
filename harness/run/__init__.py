"""Running scenarios: one run in a world, the checks that judge it, many runs at once.

* ``runner``    :func:`~harness.run.runner.run_scenario`: one scenario, one seed, one world:
                schedule faults (start-up, time, event), record, heal, gather outcomes
* ``worlds``    the one registry that admits a scenario: the world it runs in (from each
                world package's description, ``harness.world.<name>.kind``) or why it is
                skipped (backend, packing, the faults' needs, this machine); the worlds'
                session (Ray, connected once)
* ``schedule``  the runner's timed actions
* ``startup``   the wait until every node is ready at the gate; the release skew
* ``starts``    the node starts pending during a run: one per node (one incarnation at a
                time), merged when another is asked for, a restart cancellable
* ``unfired``   the records of faults whose time or event never came (they did not act)
* ``context``   what the runner lends a fault while it acts; the runner's node states
* ``outcomes``  what each node said, as the report keeps it (node and job part outcomes)
* ``checks``    invariants and expectations -> violations
* ``jobs``      a scenario's ``[job]`` as each node's JobSpec; which worlds and backends run jobs
* ``job_checks`` a job's parts: workers' RANKs, WORLD_SIZE, collective; ``[[expect.parts]]``
* ``model``     events, outcomes, violations, reports (what a run produces)
* ``one``       one scenario admitted, then run; skipped or failed as a report, never raised
* ``proxies``   what gives a run whose world's links are on a proxy its Toxiproxy API
* ``seed``      the seed a run uses
* ``suite``     many scenarios on a thread pool, as many as fit; Ctrl-C
* ``crash``     a harness failure in one line (cause, whose fault, the traceback's file)
* ``budget``    what a scenario costs the machine; how many run at once (``-j``)

Imports: :mod:`harness.scenario` (scenarios, fault kinds through their base class only),
:mod:`harness.world` (the protocol; ``worlds`` also each world's ``kind``), :mod:`harness.proxy`
(``proxies``' embedded proxies), :mod:`harness.errors`. Never reports, fuzzing or the CLI.
"""
