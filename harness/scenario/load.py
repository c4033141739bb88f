"""Reading scenario files: TOML -> :class:`~harness.scenario.model.Scenario`, or every problem.

Validation rejects unknown keys and bad values; a :class:`~harness.errors.ScenarioError`
names the file and, one line per problem, the key path (``fault[2].type``), the bad value and
what is allowed (see :mod:`harness.scenario.explain`). Every problem of a file is reported at
once: the checks that need the whole scenario (node indexes, faults that cannot apply) also
run on the parts of a file that are valid on their own when other parts are not.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from harness.errors import InvalidScenariosError, ScenarioError
from harness.scenario.consistency import consistency
from harness.scenario.explain import explain
from harness.scenario.faults.registry import FAULTS
from harness.scenario.model import (
    COLLECT,
    Endpoint,
    NodeCount,
    NodeExpect,
    NodeOverride,
    Scenario,
)

__all__ = ["load", "load_many", "parse", "read"]

_NODE_COUNT: TypeAdapter[int] = TypeAdapter(NodeCount)


def _valid(validate: Any, value: Any) -> Any:
    """``validate(value)``, or None when the value is invalid (its errors are known)."""
    try:
        return validate(value)
    except ValidationError:
        return None


def _items(validate: Any, value: Any) -> list[tuple[int, Any]]:
    """The valid entries of a list, each with its index in the file."""
    if not isinstance(value, list):
        return []
    checked = [(i, _valid(validate, v)) for i, v in enumerate(value)]
    return [(i, v) for i, v in checked if v is not None]


@dataclass(frozen=True)
class _Selector:
    """The ``nodes`` list of an entry that is invalid for another reason."""

    nodes: list[int]


def _stray(value: Any, valid: list[tuple[int, Any]], where: str) -> list[tuple[str, _Selector]]:
    """The ``nodes`` lists of a list's invalid entries (an unknown key in a fault must not
    hide that it names a node the file does not have), each with its entry's key path."""
    if not isinstance(value, list):
        return []
    ok = {i for i, _ in valid}
    found = []
    for i, entry in enumerate(value):
        nodes = entry.get("nodes") if isinstance(entry, Mapping) else None
        if i not in ok and isinstance(nodes, list) and all(type(n) is int for n in nodes):
            found.append((f"{where}[{i}]", _Selector(nodes)))
    return found


def _salvaged(data: Mapping[str, Any]) -> list[str]:
    """:func:`consistency` on the parts of an invalid file that are valid on their own, and
    on the node lists of its invalid entries."""
    count = _valid(_NODE_COUNT.validate_python, data.get("nodes"))
    if count is None:
        return []
    endpoint = _valid(Endpoint.model_validate, data.get("endpoint", {}))
    faults = _items(FAULTS.validate, data.get("fault"))
    overrides = _items(NodeOverride.model_validate, data.get("override"))
    expects: list[tuple[str, NodeExpect | _Selector]] = [
        *_stray(data.get("fault"), faults, "fault"),
        *_stray(data.get("override"), overrides, "override"),
    ]
    sections = [("expect", data.get("expect"))]
    backends = data.get("backends")
    if isinstance(backends, Mapping):
        sections += [
            (f"backends.{name}.expect", v.get("expect"))
            for name, v in backends.items()
            if isinstance(v, Mapping)
        ]
    for where, section in sections:
        if isinstance(section, Mapping):
            entries = _items(NodeExpect.model_validate, section.get("nodes"))
            expects += [(f"{where}.nodes[{i}]", e) for i, e in entries]
            expects += _stray(section.get("nodes"), entries, f"{where}.nodes")
    return consistency(count, endpoint, faults, overrides, expects)


def parse(data: Mapping[str, Any], source: str) -> Scenario:
    """Validate an already-parsed TOML mapping.

    Raises:
        ScenarioError: naming ``source`` and every problem: its key path, the bad value and
            what is allowed.
    """
    found: list[str] = []
    try:
        scenario = Scenario.model_validate({**data, "path": source}, context={COLLECT: found})
    except ValidationError as exc:
        problems = explain(exc.errors(), data) + _salvaged(data)
        raise ScenarioError(source, list(dict.fromkeys(problems))) from None
    found += _job_script(scenario, source)
    if found:
        raise ScenarioError(source, found)
    return scenario


def _job_script(scenario: Scenario, source: str) -> list[str]:
    """``job.script`` names a file next to the scenario (or an absolute path)."""
    script = scenario.job.script if scenario.job is not None else None
    if script is None or not Path(source).is_file():
        return []  # no script, or a scenario not read from a file: checked when it runs
    path = Path(source).parent / script
    if path.is_file():
        return []
    return [f"job.script: no file {script!r} (looked for {path}); give a path relative to the file"]


def read(path: str | Path) -> dict[str, Any]:
    """The TOML mapping of a scenario file, not validated (:func:`parse` does that).

    Raises:
        ScenarioError: unreadable file, or bad TOML.
    """
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ScenarioError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(str(path), [f"not valid TOML: {exc}"]) from exc


def load(path: str | Path) -> Scenario:
    """Read and validate one scenario file.

    Raises:
        ScenarioError: unreadable file, bad TOML, or invalid contents.
    """
    return parse(read(path), str(path))


def load_many(paths: Sequence[str | Path]) -> list[Scenario]:
    """Load files and directories (every ``*.toml`` below them, sorted).

    Every file is read and validated, so one error names every bad file.

    Raises:
        InvalidScenariosError: a file is invalid or a path names nothing (a
            :class:`ScenarioError`; its ``errors`` hold one per bad file or path).
    """
    files: list[Path] = []
    errors: list[ScenarioError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(path.rglob("*.toml")))
        elif path.is_file():
            files.append(path)
        else:
            errors.append(ScenarioError(str(path), ["no such file or directory"]))
    scenarios: list[Scenario] = []
    for file in files:
        try:
            scenarios.append(load(file))
        except ScenarioError as exc:
            errors.append(exc)
    if errors:
        raise InvalidScenariosError(errors, len(files))
    return scenarios
