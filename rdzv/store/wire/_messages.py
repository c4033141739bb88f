"""The requests of torch's TCPStore wire protocol, as values (sans-IO).

One immutable value class per opcode, named after torch 2.13's ``QueryType`` and holding
the opcode's fields (positional and keyword arguments, ``==``, ``hash``, ``repr`` and
``match`` patterns as a frozen dataclass's); :data:`Request` is their union. They are written
out rather than made by ``@dataclass(frozen=True, slots=True)``: nineteen of those cost 7 ms
of CPU at import, on every node, these a fraction of a millisecond. How each is laid out in
bytes, and how replies are read, is :mod:`rdzv.store.wire._wire`'s business (which re-exports
these names, so callers see one vocabulary: ``_wire.Set``, ``_wire.encode_request``).

Invariant: nothing here imports ``socket``, ``asyncio``, ``time`` or ``random``.
"""

from __future__ import annotations

from enum import IntEnum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Final, NoReturn

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

_set = object.__setattr__  # how a message's __init__ fills its (otherwise read-only) slots


class _Message:
    """What every request shares: a read-only value compared, hashed and shown by its fields
    (``__match_args__``, in order; ``__slots__`` holds them)."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    op: ClassVar[Op]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{type(self).__name__}({fields})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"cannot assign to field {name!r} of a {type(self).__name__}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"cannot delete field {name!r} of a {type(self).__name__}")

    def __reduce__(self) -> tuple[type[_Message], tuple[Any, ...]]:
        return type(self), self._values()


class Validate(_Message):
    __slots__ = ("magic",)
    __match_args__ = ("magic",)
    op: ClassVar[Op] = Op.VALIDATE
    magic: int

    def __init__(self, magic: int = MAGIC) -> None:
        _set(self, "magic", magic)


class Set(_Message):
    __slots__ = ("key", "value")
    __match_args__ = ("key", "value")
    op: ClassVar[Op] = Op.SET
    key: bytes
    value: bytes

    def __init__(self, key: bytes, value: bytes) -> None:
        _set(self, "key", key)
        _set(self, "value", value)


class CompareSet(_Message):
    __slots__ = ("desired", "expected", "key")
    __match_args__ = ("key", "expected", "desired")
    op: ClassVar[Op] = Op.COMPARE_SET
    key: bytes
    expected: bytes
    desired: bytes

    def __init__(self, key: bytes, expected: bytes, desired: bytes) -> None:
        _set(self, "key", key)
        _set(self, "expected", expected)
        _set(self, "desired", desired)


class Get(_Message):
    __slots__ = ("key",)
    __match_args__ = ("key",)
    op: ClassVar[Op] = Op.GET
    key: bytes

    def __init__(self, key: bytes) -> None:
        _set(self, "key", key)


class Add(_Message):
    __slots__ = ("delta", "key")
    __match_args__ = ("key", "delta")
    op: ClassVar[Op] = Op.ADD
    key: bytes
    delta: int

    def __init__(self, key: bytes, delta: int) -> None:
        _set(self, "key", key)
        _set(self, "delta", delta)


class Check(_Message):
    __slots__ = ("keys",)
    __match_args__ = ("keys",)
    op: ClassVar[Op] = Op.CHECK
    keys: tuple[bytes, ...]

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        _set(self, "keys", keys)


class Wait(_Message):
    __slots__ = ("keys",)
    __match_args__ = ("keys",)
    op: ClassVar[Op] = Op.WAIT
    keys: tuple[bytes, ...]

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        _set(self, "keys", keys)


class GetNumKeys(_Message):
    __slots__ = ()
    __match_args__ = ()
    op: ClassVar[Op] = Op.GETNUMKEYS


class DeleteKey(_Message):
    __slots__ = ("key",)
    __match_args__ = ("key",)
    op: ClassVar[Op] = Op.DELETE_KEY
    key: bytes

    def __init__(self, key: bytes) -> None:
        _set(self, "key", key)


class Append(_Message):
    __slots__ = ("key", "value")
    __match_args__ = ("key", "value")
    op: ClassVar[Op] = Op.APPEND
    key: bytes
    value: bytes

    def __init__(self, key: bytes, value: bytes) -> None:
        _set(self, "key", key)
        _set(self, "value", value)


class MultiGet(_Message):
    __slots__ = ("keys",)
    __match_args__ = ("keys",)
    op: ClassVar[Op] = Op.MULTI_GET
    keys: tuple[bytes, ...]

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        _set(self, "keys", keys)


class MultiSet(_Message):
    __slots__ = ("items",)
    __match_args__ = ("items",)
    op: ClassVar[Op] = Op.MULTI_SET
    items: tuple[tuple[bytes, bytes], ...]

    def __init__(self, items: tuple[tuple[bytes, bytes], ...]) -> None:
        _set(self, "items", items)


class CancelWait(_Message):
    __slots__ = ()
    __match_args__ = ()
    op: ClassVar[Op] = Op.CANCEL_WAIT


class Ping(_Message):
    __slots__ = ("nonce",)
    __match_args__ = ("nonce",)
    op: ClassVar[Op] = Op.PING
    nonce: int

    def __init__(self, nonce: int) -> None:
        _set(self, "nonce", nonce)


class QueuePush(_Message):
    __slots__ = ("key", "value")
    __match_args__ = ("key", "value")
    op: ClassVar[Op] = Op.QUEUE_PUSH
    key: bytes
    value: bytes

    def __init__(self, key: bytes, value: bytes) -> None:
        _set(self, "key", key)
        _set(self, "value", value)


class QueuePop(_Message):
    __slots__ = ("key",)
    __match_args__ = ("key",)
    op: ClassVar[Op] = Op.QUEUE_POP
    key: bytes

    def __init__(self, key: bytes) -> None:
        _set(self, "key", key)


class QueueLen(_Message):
    __slots__ = ("key",)
    __match_args__ = ("key",)
    op: ClassVar[Op] = Op.QUEUE_LEN
    key: bytes

    def __init__(self, key: bytes) -> None:
        _set(self, "key", key)


class ListKeys(_Message):
    __slots__ = ()
    __match_args__ = ()
    op: ClassVar[Op] = Op.LIST_KEYS


class Barrier(_Message):
    __slots__ = ("key", "world_size")
    __match_args__ = ("key", "world_size")
    op: ClassVar[Op] = Op.BARRIER
    key: bytes
    world_size: int

    def __init__(self, key: bytes, world_size: int) -> None:
        _set(self, "key", key)
        _set(self, "world_size", world_size)


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
