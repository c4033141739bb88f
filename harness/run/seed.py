"""The seed a scenario run uses."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from harness.scenario.model import Scenario

__all__ = ["choose_seed", "fresh_seed"]


def fresh_seed() -> int:
    """A new random 32-bit seed."""
    return secrets.randbits(32)


def choose_seed(scenario: Scenario, override: int | None, fresh: Callable[[], int]) -> int:
    """The seed a run uses: the override, else the scenario's own, else ``fresh()``."""
    if override is not None:
        return override
    if scenario.seed is not None:
        return scenario.seed
    return fresh()
