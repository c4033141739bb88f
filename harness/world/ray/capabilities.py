"""The Ray world's name and what it can do (read by its world and its description)."""

from __future__ import annotations

from typing import Final

from harness.world.base import KILL, LINKS, PAUSE, RESTART, TOXICS

__all__ = ["CAPS", "NAME"]

NAME: Final = "ray"
#: No names, squatters or store rules (nothing of them runs on the cluster's hosts), and no
#: kernel rules (the harness sets none on a cluster's hosts).
CAPS: Final = frozenset({KILL, PAUSE, RESTART, TOXICS, LINKS})
