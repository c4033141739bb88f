"""What every part of the scenario format shares: the model base, node selectors, triggers.

Imports: pydantic and the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

__all__ = [
    "TRIGGER_EVENTS",
    "FormatModel",
    "JobStage",
    "Nodes",
    "TriggerEvent",
    "one_or_more",
    "part_name",
    "pattern",
    "shown",
    "targets",
]

#: Events a fault may wait for (emitted by the nodes; a job node's by any of its parts).
#: The stages a job node's parts report (:mod:`harness.scenario.job`).
JobStage = Literal[
    "rendezvous_done", "workers_started", "restart", "pg_ready", "collective_done", "worker_failed"
]
TriggerEvent = (
    Literal["started", "connect_attempt", "connected", "joined", "complete", "failed"] | JobStage
)
TRIGGER_EVENTS: tuple[str, ...] = tuple(a for t in get_args(TriggerEvent) for a in get_args(t))
#: A node selector: a list of node indexes, ``"all"``, or ``"others"`` (all but node 0).
Nodes = list[int] | Literal["all", "others"]


class FormatModel(BaseModel):
    """The base of every scenario-format model: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def one_or_more(value: Any) -> Any:
    """An expectation's ``outcome``: one outcome, or a non-empty list meaning "any of these"
    (a ``mode="before"`` validator)."""
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("an outcome list needs at least one outcome")
        return tuple(value)
    return value


#: A fault's ``part``: the whole node, a job node's agent, or one of its workers.
_PART = re.compile(r"node|agent|worker (0|[1-9][0-9]*)")


def part_name(value: str | None) -> str | None:
    """A fault's ``part``: ``node`` (the whole node, the default), ``agent`` or
    ``worker N`` (N the worker's local rank on its node), or None."""
    if value is not None and not _PART.fullmatch(value):
        raise ValueError(
            f"got {value!r}; a part is 'node' (the whole node), 'agent' (a job node's torchrun "
            "agent alone) or 'worker N' (its worker of local rank N, e.g. 'worker 0')"
        )
    return value


def pattern(value: str | None) -> str | None:
    """An expectation's ``message``: a valid regular expression (or None)."""
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression ({exc})") from exc
    return value


def targets(count: int, nodes: Nodes) -> list[int]:
    """Resolve a node selector of a ``count``-node scenario: a list, ``"all"`` or
    ``"others"`` (all but node 0)."""
    if nodes == "all":
        return list(range(count))
    if nodes == "others":
        return list(range(1, count))
    return sorted(set(nodes))


_LONGEST_VALUE = 200


def shown(value: Any) -> str:
    """A value as the user wrote it in TOML (lists as ``[...]``, booleans ``true``/``false``),
    cut after 200 characters."""
    text = _toml_like(value)
    if len(text) > _LONGEST_VALUE:
        text = text[: _LONGEST_VALUE - 4] + " ..."
    return text


def _toml_like(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_like(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_toml_like(v)}" for k, v in value.items()) + "}"
    if isinstance(value, int | float):
        return str(value)
    return repr(value)
