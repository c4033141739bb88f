"""Toxics as Toxiproxy's API describes them: names, types, attributes, validation (pure).

A *toxic* (:class:`Toxic`) is the API-level description: name, type, stream, toxicity and
integer attributes, validated the way Toxiproxy 2.x validates them (:func:`new_toxic`,
:func:`updated_toxic`, :func:`toxic_json`). What a toxic does to the bytes of a link is
its stage (:mod:`harness.proxy.stages`).
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.errors import AlreadyExistsError, InvalidRequestError

__all__ = [
    "STREAMS",
    "TOXIC_ATTRIBUTES",
    "Toxic",
    "new_toxic",
    "toxic_json",
    "updated_toxic",
]

STREAMS = ("upstream", "downstream")
TOXIC_ATTRIBUTES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "noop": (),
        "latency": ("latency", "jitter"),
        "bandwidth": ("rate",),
        "slow_close": ("delay",),
        "timeout": ("timeout",),
        "reset_peer": ("timeout",),
        "slicer": ("average_size", "size_variation", "delay"),
        "limit_data": ("bytes",),
    }
)
_INT64 = 2**63
_BAD_STREAM = "stream was invalid, can be either upstream or downstream"
_JSON_NAMES: Mapping[type, str] = MappingProxyType(
    {str: "string", float: "number", bool: "boolean"}
)


@dataclass(frozen=True)
class Toxic:
    """A validated toxic as the API shows it; ``stream`` keeps the caller's casing."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: Mapping[str, int]

    @property
    def direction(self) -> str:
        """``"upstream"`` or ``"downstream"``, whatever the casing of ``stream``."""
        return self.stream.lower()


def _field(body: Mapping[str, object], key: str, kind: type, default: object) -> object:
    value = body.get(key)
    if value is None:
        return default
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
        raise InvalidRequestError(
            f"bad request body: field {key!r} must be a {_JSON_NAMES[kind]}, got {value!r:.80}"
        )
    return value


def _object(body: object, what: str) -> Mapping[str, object]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidRequestError(
            f"bad request body: {what} must be a JSON object, got {body!r:.80}"
        )
    return body


def _attributes(
    toxic_type: str, raw: object, current: Mapping[str, int]
) -> MappingProxyType[str, int]:
    values = dict(current)
    for key, value in _object(raw, "attributes").items():
        if key not in TOXIC_ATTRIBUTES[toxic_type]:
            continue  # Toxiproxy (Go encoding/json) ignores unknown attribute keys
        number = int(value) if isinstance(value, float) and value.is_integer() else value
        if (
            not isinstance(number, int)
            or isinstance(number, bool)
            or not -_INT64 <= number < _INT64
        ):
            where = f"attribute {key!r} of a {toxic_type} toxic"
            raise InvalidRequestError(
                f"bad request body: {where} must be an integer, got {value!r}"
            )
        values[key] = number
    return MappingProxyType(values)


def new_toxic(body: object, *, existing_names: Container[str]) -> Toxic:
    """Validate a toxic-creation request body, in Toxiproxy's order of checks.

    Args:
        body: the decoded JSON body.
        existing_names: names already used by toxics of the same proxy (either stream).

    Returns:
        The toxic, with Toxiproxy's defaults (stream ``downstream``, toxicity 1, name
        ``<type>_<stream>``, attributes 0).

    Raises:
        InvalidRequestError: wrong field types, bad stream, unknown type, bad attributes.
        AlreadyExistsError: the (possibly defaulted) name is taken.
    """
    fields = _object(body, "a toxic")
    name = _field(fields, "name", str, "")
    toxic_type = _field(fields, "type", str, "")
    stream = _field(fields, "stream", str, "downstream")
    toxicity = _field(fields, "toxicity", float, 1.0)
    assert isinstance(name, str) and isinstance(toxic_type, str) and isinstance(stream, str)
    assert isinstance(toxicity, float)
    if stream.lower() not in STREAMS:
        raise InvalidRequestError(_BAD_STREAM)
    name = name or f"{toxic_type}_{stream}"
    if toxic_type not in TOXIC_ATTRIBUTES:
        raise InvalidRequestError("invalid toxic type")
    if name in existing_names:
        raise AlreadyExistsError("toxic already exists")
    zeros = dict.fromkeys(TOXIC_ATTRIBUTES[toxic_type], 0)
    attributes = _attributes(toxic_type, fields.get("attributes"), zeros)
    return Toxic(name, toxic_type, stream, toxicity, attributes)


def updated_toxic(toxic: Toxic, body: object) -> Toxic:
    """Apply an update body: only ``attributes`` (merged) and ``toxicity`` change.

    Raises:
        InvalidRequestError: the body or one of its fields has the wrong type.
    """
    fields = _object(body, "a toxic update")
    toxicity = _field(fields, "toxicity", float, toxic.toxicity)
    assert isinstance(toxicity, float)
    attributes = _attributes(toxic.type, fields.get("attributes"), toxic.attributes)
    return Toxic(toxic.name, toxic.type, toxic.stream, toxicity, attributes)


def toxic_json(toxic: Toxic) -> dict[str, object]:
    """The toxic as Toxiproxy serialises it (integral toxicity printed as an integer)."""
    toxicity: float = toxic.toxicity
    if toxicity.is_integer() and abs(toxicity) < _INT64:
        toxicity = int(toxicity)
    return {
        "attributes": dict(toxic.attributes),
        "name": toxic.name,
        "type": toxic.type,
        "stream": toxic.stream,
        "toxicity": toxicity,
    }
