"""The requests of torch's TCPStore wire protocol, as values (sans-IO).

One frozen dataclass per opcode, named after torch 2.13's ``QueryType`` and holding the
opcode's fields; :data:`Request` is their union. How each is laid out in bytes, and how
replies are read, is :mod:`rdzv.store._wire`'s business (which re-exports these names, so
callers see one vocabulary: ``_wire.Set``, ``_wire.encode_request``).

Invariant: nothing here imports ``socket``, ``asyncio``, ``time`` or ``random``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Final

__all__ = [
    "MAGIC",
    "Add",
    "Append",
    "Barrier",
    "CancelWait",
    "Check",
    "CompareSet",
    "DeleteKey",
    "Get",
    "GetNumKeys",
    "ListKeys",
    "MultiGet",
    "MultiSet",
    "Op",
    "Ping",
    "QueueLen",
    "QueuePop",
    "QueuePush",
    "Request",
    "Set",
    "Validate",
    "Wait",
]

#: What a VALIDATE request carries: torch's handshake constant.
MAGIC: Final = 0x3C85F7CE


class Op(IntEnum):
    """Opcodes (torch 2.13 ``QueryType``)."""

    VALIDATE = 0
    SET = 1
    COMPARE_SET = 2
    GET = 3
    ADD = 4
    CHECK = 5
    WAIT = 6
    GETNUMKEYS = 7
    DELETE_KEY = 8
    APPEND = 9
    MULTI_GET = 10
    MULTI_SET = 11
    CANCEL_WAIT = 12
    PING = 13
    QUEUE_PUSH = 14
    QUEUE_POP = 15
    QUEUE_LEN = 16
    LIST_KEYS = 17
    BARRIER = 18


# --- request messages -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Validate:
    op: ClassVar[Op] = Op.VALIDATE
    magic: int = MAGIC


@dataclass(frozen=True, slots=True)
class Set:
    op: ClassVar[Op] = Op.SET
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class CompareSet:
    op: ClassVar[Op] = Op.COMPARE_SET
    key: bytes
    expected: bytes
    desired: bytes


@dataclass(frozen=True, slots=True)
class Get:
    op: ClassVar[Op] = Op.GET
    key: bytes


@dataclass(frozen=True, slots=True)
class Add:
    op: ClassVar[Op] = Op.ADD
    key: bytes
    delta: int


@dataclass(frozen=True, slots=True)
class Check:
    op: ClassVar[Op] = Op.CHECK
    keys: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Wait:
    op: ClassVar[Op] = Op.WAIT
    keys: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class GetNumKeys:
    op: ClassVar[Op] = Op.GETNUMKEYS


@dataclass(frozen=True, slots=True)
class DeleteKey:
    op: ClassVar[Op] = Op.DELETE_KEY
    key: bytes


@dataclass(frozen=True, slots=True)
class Append:
    op: ClassVar[Op] = Op.APPEND
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class MultiGet:
    op: ClassVar[Op] = Op.MULTI_GET
    keys: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class MultiSet:
    op: ClassVar[Op] = Op.MULTI_SET
    items: tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True, slots=True)
class CancelWait:
    op: ClassVar[Op] = Op.CANCEL_WAIT


@dataclass(frozen=True, slots=True)
class Ping:
    op: ClassVar[Op] = Op.PING
    nonce: int


@dataclass(frozen=True, slots=True)
class QueuePush:
    op: ClassVar[Op] = Op.QUEUE_PUSH
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class QueuePop:
    op: ClassVar[Op] = Op.QUEUE_POP
    key: bytes


@dataclass(frozen=True, slots=True)
class QueueLen:
    op: ClassVar[Op] = Op.QUEUE_LEN
    key: bytes


@dataclass(frozen=True, slots=True)
class ListKeys:
    op: ClassVar[Op] = Op.LIST_KEYS


@dataclass(frozen=True, slots=True)
class Barrier:
    op: ClassVar[Op] = Op.BARRIER
    key: bytes
    world_size: int


Request = (
    Validate
    | Set
    | CompareSet
    | Get
    | Add
    | Check
    | Wait
    | GetNumKeys
    | DeleteKey
    | Append
    | MultiGet
    | MultiSet
    | CancelWait
    | Ping
    | QueuePush
    | QueuePop
    | QueueLen
    | ListKeys
    | Barrier
)
