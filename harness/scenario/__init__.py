"""The scenario format: TOML files -> validated models, fault kinds, and every problem named.

* ``format``       what every part shares: the model base, node selectors, triggers, values
                   shown as TOML
* ``model``        :class:`~harness.scenario.model.Scenario` and its tables
* ``job``          the ``[job]`` table and ``[[expect.parts]]`` (nodes that are torchrun jobs)
* ``expect``       ``[expect]`` and ``[[expect.nodes]]``: outcomes, invariants a backend breaks
* ``faults``       the fault kinds: one class each (keys, checks, ``inject -> heal``), and
                   the registry that makes a kind part of the format
* ``load``         ``load``, ``load_many``, ``parse``: files -> scenarios, or every problem
* ``consistency``  checks that need the whole file (node indexes, faults that cannot apply)
* ``explain``      pydantic's errors in the format's words: key path, bad value, allowed

Imports: :mod:`harness.world.base` (the verbs fault kinds act through; never a world's
implementation), :mod:`harness.errors`, pydantic. Never the runner, reports or the CLI.
"""
