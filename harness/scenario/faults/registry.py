"""The fault kinds the scenario format knows, by ``kind``: :data:`FAULTS`.

The loader validates every ``[[fault]]`` table through :data:`FAULTS` (:data:`FaultEntry`),
so a kind registered at run time is a kind of the format from then on: its keys are
validated and explained like the built-in ones', its errors name their key paths. The
built-in kinds are registered here, in the order ``allowed:`` lists them::

    from harness.scenario.faults.registry import FAULTS

    @FAULTS.register
    class SigtermFault(Timed):
        kind: Literal["sigterm"]
        ...

    FAULTS.unregister(SigtermFault)          # or: with FAULTS.registered(SigtermFault): ...

:data:`FAULTS` is the one piece of module-level mutable state of the scenario layer, on
purpose: registering a kind is how a user extends the format.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import Field, SerializeAsAny, TypeAdapter, WrapValidator

from harness.scenario.faults.base import Fault
from harness.scenario.faults.kernel import (
    BandwidthFault,
    DropFault,
    FilterFault,
    LossFault,
    PartitionFault,
    RejectFault,
)
from harness.scenario.faults.network import DnsFault, LinkFault, ToxicFault
from harness.scenario.faults.nodes import (
    AbsentFault,
    KillFault,
    LateStartFault,
    PauseFault,
    RestartFault,
)
from harness.scenario.faults.store import SquatterFault, StoreOpFault

__all__ = ["FAULTS", "FaultEntry", "FaultRegistry"]

F = TypeVar("F", bound=type[Fault])


def _kinds_of(cls: type[Fault]) -> tuple[str, ...]:
    """The ``kind`` values a fault class declares (its ``Literal``).

    Raises:
        TypeError: ``cls`` is not a :class:`Fault` subclass with a ``Literal`` kind.
    """
    if not (isinstance(cls, type) and issubclass(cls, Fault)) or cls is Fault:
        raise TypeError(f"a fault kind subclasses harness.scenario.faults.base.Fault: {cls!r}")
    field = cls.model_fields.get("kind")
    annotation = field.annotation if field is not None else None
    if get_origin(annotation) is not Literal:
        raise TypeError(
            f"{cls.__name__}.kind must be a Literal of the kind's name, e.g. "
            "kind: Literal['sigterm']"
        )
    return tuple(str(k) for k in get_args(annotation))


class FaultRegistry:
    """Fault classes by ``kind``, and a validator of ``[[fault]]`` tables over them."""

    def __init__(self, classes: Iterable[type[Fault]] = ()) -> None:
        self._lock = threading.Lock()
        self._classes: dict[str, type[Fault]] = {}
        self._adapter: TypeAdapter[Any] | None = None
        for cls in classes:
            self.register(cls)

    def register(self, cls: F) -> F:
        """Add a fault kind (usable as a class decorator); returns ``cls``.

        Raises:
            TypeError: ``cls`` is not a fault class with a ``Literal`` ``kind``.
            ValueError: one of its kinds is registered already.
        """
        kinds = _kinds_of(cls)
        with self._lock:
            for kind in kinds:
                if kind in self._classes:
                    owner = self._classes[kind].__name__
                    raise ValueError(f"fault kind {kind!r} is registered already (by {owner})")
            for kind in kinds:
                self._classes[kind] = cls
            self._adapter = None
        return cls

    def unregister(self, cls: type[Fault]) -> None:
        """Remove every kind ``cls`` registered.

        Raises:
            KeyError: ``cls`` is not registered.
        """
        with self._lock:
            kinds = [k for k, c in self._classes.items() if c is cls]
            if not kinds:
                raise KeyError(f"{cls.__name__} is not a registered fault kind")
            for kind in kinds:
                del self._classes[kind]
            self._adapter = None

    @contextlib.contextmanager
    def registered(self, cls: F) -> Iterator[F]:
        """``cls`` registered for the duration of the ``with`` block."""
        self.register(cls)
        try:
            yield cls
        finally:
            self.unregister(cls)

    def unknown(self, names: frozenset[str]) -> str | None:
        """What is wrong with ``names`` as a choice of kinds, in a few words (None: each is
        registered, and there is one at least); :meth:`listing` names the kinds."""
        unknown = sorted(names - set(self.kinds()))
        if unknown:
            return f"unknown fault kind(s) {', '.join(unknown)}"
        return None if names else "no fault kind"

    def listing(self) -> str:
        """Every registered kind, sorted, for an error message."""
        return ", ".join(sorted(self.kinds()))

    def kinds(self) -> tuple[str, ...]:
        """Every registered ``kind``, in registration order."""
        with self._lock:
            return tuple(self._classes)

    def get(self, kind: object) -> type[Fault] | None:
        """The class of ``kind`` (None: no such kind)."""
        with self._lock:
            return self._classes.get(kind) if isinstance(kind, str) else None

    def validate(self, value: Any) -> Fault:
        """One ``[[fault]]`` table as the model of its ``kind``.

        Raises:
            pydantic.ValidationError: unknown or missing ``kind``, or bad keys for it.
        """
        with self._lock:
            if self._adapter is None:
                self._adapter = _adapter(list(dict.fromkeys(self._classes.values())))
            adapter = self._adapter
        found: Fault = adapter.validate_python(value)
        return found


def _adapter(classes: list[type[Fault]]) -> TypeAdapter[Any]:
    if len(classes) == 1:
        return TypeAdapter(classes[0])
    union: Any = Union[tuple(classes)]  # noqa: UP007 (a Union built at run time)
    return TypeAdapter(Annotated[union, Field(discriminator="kind")])


#: The kinds of the format: the built-in ones, and any registered since.
FAULTS = FaultRegistry(
    [
        ToxicFault,
        LinkFault,
        AbsentFault,
        LateStartFault,
        KillFault,
        PauseFault,
        RestartFault,
        SquatterFault,
        DnsFault,
        StoreOpFault,
        DropFault,
        RejectFault,
        PartitionFault,
        LossFault,
        FilterFault,
        BandwidthFault,
    ]
)


def _by_kind(value: Any, _handler: Any) -> Fault:
    return FAULTS.validate(value)


#: A ``[[fault]]`` table in a model: validated by :data:`FAULTS`, dumped as its own kind.
FaultEntry = Annotated[SerializeAsAny[Fault], WrapValidator(_by_kind)]
