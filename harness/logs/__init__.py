"""Reading failed start-ups' logs back into scenarios (``harness from-log``).

A sans-IO pipeline, one module a step, lowest first:

* ``lines``    one line -> its format (Python logging, bracketed date, glog, c10d C++, NCCL,
               schedulers, the harness's reports) and its text, prefixes peeled
* ``causes``   error texts -> causes on the wire; error classes -> the harness's outcomes
* ``signals``  a line -> what it says (errors and their causes, ranks, world size, joins,
               deaths, restarts, barriers, torch's and rdzv's structured events, the
               error-file JSON, the ``ChildFailedError`` box)
* ``streams``  lines grouped into one stream per node, each with its node id
* ``facts``    the job's shape, timeouts and each node's end, with the lines they came from
* ``faults_for`` one cause on some nodes -> the fault that makes them meet it
* ``planned``  what the scenario will hold (``Plan``, ``PlannedFault``)
* ``missing``  who never came, held a key back or restarted (plan's missing-rank rules)
* ``plan``     facts -> overrides, faults and expectations, each with its reason
* ``write``    a plan -> scenario TOML (tomli-w) with ``#`` comments quoting the log,
               validated with :func:`harness.scenario.load.parse`
* ``convert``  the entry point: :func:`convert` (logs in, a :class:`Conversion` out)

It may import ``harness.errors``, ``harness.scenario`` (to validate what it writes) and
``harness.world.process.jobs.spec`` (to class a worker's error as a job node does); only
``harness.cli`` imports it.
"""

from __future__ import annotations

from harness.logs.convert import WORLDS, Conversion, FromLogError, convert

__all__ = ["WORLDS", "Conversion", "FromLogError", "convert"]
