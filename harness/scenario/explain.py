"""Pydantic's validation errors, told in the scenario format's own words.

:func:`explain` turns the errors of one validation into one line per problem, in the
key-path style of docs/scenarios.md, each showing the bad value::

    expect.outcome: got 'okk'; allowed: 'ok', 'timeout', ... or 'absent', or a list
    fault[0].type: got 'latencyy'; allowed: 'latency', 'bandwidth', ...
    timeouts.join: got -1; must be greater than 0
    colour: unknown key

Nothing of pydantic's own vocabulary reaches the user: the branch labels it puts in the
locations of union members (``literal[...]``, ``tuple[...]``, ``list[int]``, a
discriminator's tag) are dropped by walking each location through the input itself (a
label that is not a key of the input is not the user's), "Value error, " prefixes go, and
"Input should be ..." becomes what the value must be. When every member of a union rejects
a value, the line lists what each would accept; when one member got further into the value
than the others (an outcome list with one bad entry), its errors are the ones shown.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness.scenario.faults.registry import FAULTS
from harness.scenario.format import FormatModel, shown

__all__ = ["explain", "key_path", "shown"]

#: What a value must be, by pydantic error type (the type mismatches and parse failures).
_MUST_BE = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
#: The same, as one of several things a value may be.
_KIND_NAMES = {"bool_type": "a boolean", "bool_parsing": "a boolean"}
#: Friendlier words for the patterns the format uses.
_PATTERNS = {
    r"^[a-z0-9][a-z0-9._-]*$": "lowercase letters, digits, '.', '_' and '-', "
    "starting with a letter or a digit",
    r"^F\d\d$": "'F' and two digits, e.g. 'F03'",
}


def key_path(parts: Iterable[str | int]) -> str:
    """``("fault", 2, "type")`` -> ``fault[2].type``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True)
class _Located:
    """One error with its location split into the user's keys and pydantic's labels."""

    path: tuple[str | int, ...]  # keys and indexes that exist in the input
    union: tuple[tuple[str | int, ...], str] | None  # (where the union is, member label)
    value: Any  # the input at ``path``
    error: Mapping[str, Any]


_NOTHING = object()


def _child(value: Any, part: str | int) -> Any:
    """``value[part]`` when the user's data has that key or index, else ``_NOTHING``."""
    if isinstance(part, int) and isinstance(value, list | tuple) and part < len(value):
        return value[part]
    if isinstance(part, str) and isinstance(value, Mapping) and part in value:
        return value[part]
    return _NOTHING


def _locate(error: Mapping[str, Any], data: Any) -> _Located:
    loc: Sequence[str | int] = error.get("loc", ())
    path: list[str | int] = []
    union: tuple[tuple[str | int, ...], str] | None = None
    current = data
    for i, part in enumerate(loc):
        inside = _child(current, part)
        if inside is not _NOTHING:
            path.append(part)
            current = inside
        elif i == len(loc) - 1 and error.get("type") == "missing":
            path.append(part)
            current = None
        else:  # a label pydantic gives a member of a union: not in the user's file
            union = (tuple(path), str(part))
    return _Located(tuple(path), union, error.get("input", current), error)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _detail(error: Mapping[str, Any]) -> str:
    """What is wrong, without the value."""
    kind = error.get("type", "")
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    if kind in _MUST_BE:
        return f"must be {_MUST_BE[kind]}"
    if kind == "literal_error":
        return f"allowed: {ctx.get('expected')}"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", "invalid value"))
    if kind == "greater_than_equal":
        return f"must be at least {_number(ctx.get('ge'))}"
    if kind == "greater_than":
        return f"must be greater than {_number(ctx.get('gt'))}"
    if kind == "less_than_equal":
        return f"must be at most {_number(ctx.get('le'))}"
    if kind == "less_than":
        return f"must be less than {_number(ctx.get('lt'))}"
    if kind == "string_too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"needs at least {least} characters"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"takes at most {ctx.get('max_length')} item(s)"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return f"must be {_PATTERNS[pattern]}" if pattern in _PATTERNS else f"must match {pattern}"
    message = str(error.get("msg", "invalid value"))
    return message.replace("Input should be", "must be").replace("Value error, ", "")


def _line(item: _Located, data: Any) -> str:
    error = item.error
    kind = error.get("type", "")
    where = key_path(item.path)
    if kind == "missing":
        text = "required key is missing"
    elif kind == "extra_forbidden":
        text = "unknown key" + _did_you_mean(item.path, data)
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        ctx: Mapping[str, Any] = error.get("ctx") or {}
        where = key_path([*item.path, str(ctx.get("discriminator", "kind")).strip("'")])
        allowed = ctx.get("expected_tags") or ", ".join(repr(k) for k in FAULTS.kinds())
        if kind == "union_tag_not_found":
            text = "required key is missing"
            return f"{where}: {text}; allowed: {allowed}"
        text = f"got {shown(ctx.get('tag'))};{_closest(ctx.get('tag'), allowed)} allowed: {allowed}"
    elif kind == "literal_error":
        allowed = str((error.get("ctx") or {}).get("expected"))
        text = f"got {shown(item.value)};{_closest(item.value, allowed)} allowed: {allowed}"
    else:
        text = _detail(error)
        value = shown(item.value)
        if not isinstance(item.value, Mapping) and value not in text:
            text = f"got {value}; {text}"
    return f"{where}: {text}" if where else text


def _closest(value: Any, allowed: str) -> str:
    """`` did you mean 'filter'?`` when ``value`` is close to one of the quoted names in
    ``allowed`` (pydantic's list of a literal's values), else ``""``."""
    names = re.findall(r"'([^']*)'", allowed)
    close = difflib.get_close_matches(value, names, n=1) if isinstance(value, str) else []
    return f" did you mean {close[0]!r}?" if close else ""


def _models(base: type[BaseModel] = FormatModel) -> Iterable[type[BaseModel]]:
    for sub in base.__subclasses__():
        yield sub
        yield from _models(sub)


def _did_you_mean(path: Sequence[str | int], data: Any) -> str:
    """``; did you mean 'hard'?`` for an unknown key close to a key of its table, else ``""``;
    where the key goes, when the fault kind of its table knows (a toxic's attribute).

    The table's model is the one whose keys include most of the table's other keys (the
    error does not name it); with no other keys, every key of the format is a candidate.
    """
    if not path or not isinstance(path[-1], str):
        return ""
    table: Any = data
    for part in path[:-1]:
        try:
            table = table[part]
        except (LookupError, TypeError):
            return ""
    if not isinstance(table, Mapping):
        return ""
    kind = FAULTS.get(table.get("kind")) if path[0] == "fault" else None
    goes = kind.where_key_goes(path[-1], table) if kind is not None else None
    if goes is not None:
        return f"; {goes}"
    others = set(table) - {path[-1]}
    keysets = [
        {field.alias or name for name, field in model.model_fields.items()} for model in _models()
    ]
    best = max((len(others & keys) for keys in keysets), default=0)
    candidates = sorted({key for keys in keysets if len(others & keys) == best for key in keys})
    close = difflib.get_close_matches(path[-1], candidates, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _merged(members: list[list[_Located]]) -> str:
    """One line for a value every member of a union rejected outright."""
    first = members[0][0]
    literals: list[str] = []
    kinds: list[str] = []
    for errors in members:
        for item in errors:
            kind = item.error.get("type", "")
            if kind == "literal_error":
                literals.append(str((item.error.get("ctx") or {}).get("expected")))
            else:
                kinds.append(_KIND_NAMES.get(kind) or _MUST_BE.get(kind) or _detail(item.error))
    if "a number" in kinds:
        kinds = [k for k in kinds if k != "a whole number"]
    allowed = list(dict.fromkeys(literals + kinds))
    listed = allowed[0]
    for i, option in enumerate(allowed[1:], start=1):
        last = i == len(allowed) - 1
        joint = (", or " if " or " in listed else " or ") if last else ", "
        listed += joint + option
    where = key_path(first.path)  # every member's error sits at the union's own key
    hint = _closest(first.value, ", ".join(literals))
    text = f"got {shown(first.value)};{hint} allowed: {listed}"
    return f"{where}: {text}" if where else text


def explain(errors: Sequence[Mapping[str, Any]], data: Any) -> list[str]:
    """One line per problem of a failed validation of ``data``.

    Args:
        errors: pydantic's ``ValidationError.errors()``.
        data: the input that was validated (the parsed TOML).
    """
    located = [_locate(e, data) for e in errors]
    unions: dict[tuple[str | int, ...], dict[str, list[_Located]]] = {}
    for item in located:
        if item.union is not None:
            anchor, member = item.union
            unions.setdefault(anchor, {}).setdefault(member, []).append(item)
    lines: list[str] = []
    done: set[tuple[str | int, ...]] = set()
    for item in located:
        if item.union is None:
            lines.append(_line(item, data))
            continue
        anchor = item.union[0]
        if anchor in done:
            continue
        done.add(anchor)
        members = unions[anchor]
        deepest = max(len(e.path) for errs in members.values() for e in errs)
        best = [errs for errs in members.values() if max(len(e.path) for e in errs) == deepest]
        if len(best) == 1 or deepest > len(anchor):
            lines.extend(_line(e, data) for errs in best for e in errs)
        else:
            lines.append(_merged(best))
    return list(dict.fromkeys(lines))
