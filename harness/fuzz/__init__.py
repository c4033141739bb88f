"""Fuzzing: random scenarios on real nodes, judged against an oracle, failures shrunk.

* ``strategies``  hypothesis strategies: endpoints, fault schedules, whole scenarios
* ``oracle``      a scenario's faults -> the outcomes rdzv must report (its ``expect``)
* ``ordered``     the oracle's rule on a run's recorded order: no round with a dead member
* ``loop``        the fuzz loop: run, shrink, write the minimal failing scenario; replay

Imported only by ``harness fuzz | replay`` and property tests (hypothesis is heavy).
Imports: :mod:`harness.run` (to run scenarios), :mod:`harness.scenario` (to load them),
hypothesis, tomli-w. Never a world, the proxy or reports directly.
"""
