"""Reports of runs: console summary, JUnit XML, a self-contained HTML timeline.

* ``text``      plain words every report uses: verdicts, result and totals lines, faults
* ``fold``      large runs: nodes that say the same thing folded into one line, node ranges
* ``console``   the rich summary table and failure panels
* ``junit``     JUnit XML for CI
* ``failure``   a failed run as plain text for a test runner (the pytest plugin)
* ``details``   what every node said and did, passing runs too (``harness run -v``)
* ``html``      the HTML report (jinja2, ``templates/report.html.j2``)
* ``timeline``  the timeline's geometry: lanes, markers, fault windows (pure)
* ``shapes``    what a timeline is drawn with (plain data)
* ``glyphs``    outcome and fault colours, event glyphs (pure)

Every renderer is a pure function of :class:`~harness.run.model.Report` objects. Imports:
:mod:`harness.run.model` (the reports, and nothing else of ``run``), :mod:`harness.scenario`
(outcome names), rich, jinja2. Reports know nothing of how nodes run: never
:mod:`harness.world` or :mod:`harness.proxy`.
"""
