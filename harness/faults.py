"""The fault kinds of the scenario format (``[[fault]]`` tables) as validated models.

Each kind is a frozen pydantic model that rejects unknown keys; :data:`Fault` is their
union, told apart by ``kind``. What each kind does is in docs/scenarios.md; the runner
(:mod:`harness.runner`) applies them. Checks that need the whole scenario (node indexes,
node 0 as a target, one squatter) live in :class:`harness.scenario.Scenario`.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "FAULT_KINDS",
    "TRIGGER_EVENTS",
    "AbsentFault",
    "DnsFault",
    "Fault",
    "FormatModel",
    "LateStartFault",
    "LinkFault",
    "Nodes",
    "ProcessFault",
    "SquatterFault",
    "StoreOpFault",
    "ToxicFault",
    "TriggerEvent",
]

#: Events a fault may wait for (emitted by the node processes).
TriggerEvent = Literal["started", "connect_attempt", "connected", "joined", "complete", "failed"]
TRIGGER_EVENTS: tuple[str, ...] = get_args(TriggerEvent)
Nodes = list[int] | Literal["all", "others"]


class FormatModel(BaseModel):
    """The base of every scenario-format model: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class _Timed(FormatModel):
    """When a fault fires: ``at`` seconds after start, or ``after`` seconds past an event."""

    at: float | None = Field(default=None, ge=0)
    on: TriggerEvent | None = None
    on_node: int | None = Field(default=None, ge=0)
    after: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one_trigger(self) -> _Timed:
        if self.on is not None and self.at is not None:
            raise ValueError("give either 'at' (seconds) or 'on' (an event), not both")
        if self.on is not None and self.on_node is None:
            raise ValueError("'on' needs 'on_node': the node whose event triggers the fault")
        if self.on is None and self.on_node is not None:
            raise ValueError("'on_node' needs 'on': the event to wait for")
        return self


class ToxicFault(_Timed):
    kind: Literal["toxic"]
    nodes: Nodes = "others"
    type: Literal[
        "latency",
        "bandwidth",
        "slow_close",
        "timeout",
        "reset_peer",
        "slicer",
        "limit_data",
        "noop",
    ]
    stream: Literal["upstream", "downstream"] = "downstream"
    toxicity: float = Field(default=1.0, ge=0, le=1)
    attributes: dict[str, int] = Field(default_factory=dict)
    duration: float | None = Field(default=None, gt=0)


class LinkFault(_Timed):
    kind: Literal["link_down"]
    nodes: Nodes = "others"
    duration: float | None = Field(default=None, gt=0)


class AbsentFault(FormatModel):
    kind: Literal["absent"]
    nodes: list[int]


class LateStartFault(FormatModel):
    kind: Literal["late_start"]
    nodes: list[int]
    delay: float = Field(gt=0)


class ProcessFault(_Timed):
    kind: Literal["kill", "pause", "restart"]
    nodes: list[int]
    duration: float | None = Field(default=None, gt=0)


class SquatterFault(FormatModel):
    kind: Literal["squatter"]
    mode: Literal["ipv4-wildcard", "ipv6-wildcard", "loopback", "silent", "http"]
    duration: float | None = Field(default=None, gt=0)


class DnsFault(_Timed):
    kind: Literal["dns"]
    nodes: Nodes = "all"
    duration: float | None = Field(default=None, gt=0)


class StoreOpFault(_Timed):
    kind: Literal["store_op"]
    nodes: Nodes = "others"
    op: Literal[
        "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS", "DELETE_KEY",
        "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "QUEUE_PUSH", "QUEUE_POP",
        "QUEUE_LEN", "LIST_KEYS", "BARRIER",
    ]  # fmt: skip
    keys: str = "*"
    action: Literal["delay", "drop", "fail"]
    delay: float = Field(default=0.0, ge=0)
    count: int = Field(default=1, ge=1)


Fault = Annotated[
    ToxicFault
    | LinkFault
    | AbsentFault
    | LateStartFault
    | ProcessFault
    | SquatterFault
    | DnsFault
    | StoreOpFault,
    Field(discriminator="kind"),
]


#: Every ``kind`` a fault can have (the union's discriminator values).
FAULT_KINDS = (
    "toxic", "link_down", "absent", "late_start", "kill", "pause", "restart",
    "squatter", "dns", "store_op",
)  # fmt: skip
