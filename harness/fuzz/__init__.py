"""Fuzzing: random scenarios on real nodes, judged against an oracle, failures shrunk.

* ``strategies``  hypothesis strategies: endpoints, fault schedules, whole scenarios
* ``oracle``      a scenario's faults -> the outcomes rdzv must report (its ``expect``)
* ``ordered``     the oracle's rule on a run's recorded order: no round with a dead member;
                  the schedules that put it to the test
* ``loop``        the fuzz loop: run, shrink, write the minimal failing scenario; replay

Nothing here knows a fault kind by name (but ``ordered``'s schedules, which are about
kills): each kind draws itself and says what it may do to the outcomes (its ``draw`` and
``effect`` hooks, :class:`~harness.scenario.faults.base.Fault`); the strategies and the
oracle ask the registry
(:data:`~harness.scenario.faults.registry.FAULTS`), and draw only the kinds the chosen
world can carry out.

Imported only by ``harness fuzz | replay`` and property tests (hypothesis is heavy).
Imports: :mod:`harness.run` (to run scenarios: the suite, the reports, and which world can
do what), :mod:`harness.scenario` (to load them, and the fault kinds' hooks),
:mod:`harness.report.fold` (ranks named as reports and rdzv name them), hypothesis,
tomli-w. Never a world or the proxy.
"""
