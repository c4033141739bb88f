"""Fault kinds: each ``[[fault]]`` kind is one class that owns its keys, their checks and its
effect (``inject(world, ctx) -> heal``), and counts what it did.

* ``base``      the :class:`~harness.scenario.faults.base.Fault` base class and its hooks, the
                :class:`~harness.scenario.faults.base.Timed` keys, what the runner lends a
                fault (``Context``)
* ``record``    :class:`~harness.scenario.faults.record.FaultRecord`: what a fault did
* ``checks``    checks several kinds share (node 0 has no link, absent nodes never start)
* ``network``   ``toxic``, ``link_down``, ``dns``
* ``nodes``     ``kill``, ``pause``, ``restart``, ``absent``, ``late_start``
* ``store``     ``store_op``, ``squatter``
* ``kernel``    ``drop``, ``reject``, ``partition``, ``loss``, ``filter``, ``bandwidth``
* ``fuzzing``   what a kind tells the fuzzer: the scenario it is drawn for (``Outline``) and
                what it may do to the outcomes (``Effect``)
* ``draws``     hypothesis building blocks the kinds' ``draw`` hooks use (imported inside
                them only: loading scenarios never imports hypothesis)
* ``registry``  :data:`~harness.scenario.faults.registry.FAULTS`: the kinds by name; adding a
                kind is one class registered there, and its row in docs/scenarios.md

Imports: :mod:`harness.scenario.format`, :mod:`harness.world.base` (the verbs faults act
through), pydantic; hypothesis only inside ``draw`` hooks. Never the runner, a world's
implementation, or reports.
"""
