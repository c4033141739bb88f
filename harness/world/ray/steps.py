"""The start-up steps of a Ray run, announced on stderr when asked (for tests and for
seeing where a slow start is).

With ``HARNESS_RAY_STEPS=1`` in the environment, each step the Ray world takes writes one
line ``harness-ray-step: <step>`` to stderr as it begins, so a test can act (send a
Ctrl-C) at a precise step instead of after a guessed delay. The steps, in order:

=====================  ==========================================================
``ray-init``           a local Ray is being started, or a cluster joined (``ray.init``)
``ray-up``             ``ray.init`` returned
``placement-group``    the run's placement group was asked for; waiting until placed
``actors``             the node group actors were created; the proxy agents are next
``sync``               waiting for each node group actor to come up
``start``              the nodes are being started in their actors
``release``            the start gates are being opened
``running``            every node was released: the scenario runs
=====================  ==========================================================
"""

from __future__ import annotations

import os
import sys
from typing import Final

__all__ = ["ENV", "STEPS", "announce"]

#: The environment variable that switches the announcements on.
ENV: Final = "HARNESS_RAY_STEPS"
#: Every step, in the order a run takes them.
STEPS: Final = (
    "ray-init",
    "ray-up",
    "placement-group",
    "actors",
    "sync",
    "start",
    "release",
    "running",
)
_PREFIX: Final = "harness-ray-step: "


def announce(step: str) -> None:
    """Write ``step`` to stderr (one line, flushed) if ``HARNESS_RAY_STEPS`` is set.

    Raises:
        ValueError: ``step`` is not one of :data:`STEPS` (a harness bug).
    """
    if step not in STEPS:
        raise ValueError(f"unknown Ray start-up step {step!r}: one of {', '.join(STEPS)}")
    if os.environ.get(ENV, "") not in ("", "0"):
        sys.stderr.write(f"{_PREFIX}{step}\n")
        sys.stderr.flush()
