"""Scenario files: TOML -> validated, frozen models. The format reference is docs/scenarios.md.

Validation rejects unknown keys and bad values; a :class:`~harness.errors.ScenarioError`
names the file and, one line per problem, the key path (``fault[2].type``), the bad value and
what is allowed (see :mod:`harness.explain`). Every problem of a file is reported at once:
the checks that need the whole scenario (node indexes, faults that cannot apply) also run on
the parts of a file that are valid on their own when other parts are not.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.consistency import consistency
from harness.consistency import targets as _targets
from harness.errors import InvalidScenariosError, ScenarioError
from harness.explain import explain
from harness.faults import (
    Fault,
    FormatModel,
    Nodes,
)

__all__ = [
    "INVARIANTS",
    "OUTCOMES",
    "BackendVariant",
    "Expect",
    "Fault",
    "NodeExpect",
    "NodeOverride",
    "Scenario",
    "allowed_outcomes",
    "backend_name",
    "load",
    "load_many",
    "parse",
]

Outcome = Literal[
    "ok",
    "timeout",
    "connection_error",
    "state_error",
    "closed",
    "error",
    "killed",
    "hung",
    "absent",
]
#: Every outcome a node can report.
OUTCOMES: tuple[str, ...] = get_args(Outcome)
Invariant = Literal["ranks", "world_size", "complete_round", "shared_store", "hung"]
#: Invariant checks (see :mod:`harness.checks`) a backend may be recorded as breaking.
INVARIANTS: tuple[str, ...] = get_args(Invariant)
#: The backends the harness knows by name (plus ``module:factory`` for a user's handler).
NAMED_BACKENDS = ("static", "torch-static")


class NodeOverride(FormatModel):
    """Per-node deviations from the common configuration (a misconfigured node)."""

    nodes: list[int]
    rank: int | None = Field(default=None, ge=0)
    world_size: int | None = Field(default=None, ge=1)
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)


def allowed_outcomes(outcome: Outcome | tuple[Outcome, ...]) -> tuple[str, ...]:
    """An expectation's outcome as the tuple of outcomes it accepts."""
    return (outcome,) if isinstance(outcome, str) else tuple(outcome)


def _one_or_more(value: Any) -> Any:
    """``outcome`` is one outcome or a non-empty list meaning "any of these"."""
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("an outcome list needs at least one outcome")
        return tuple(value)
    return value


class NodeExpect(FormatModel):
    """What some nodes must report (``outcome`` may list several allowed outcomes)."""

    nodes: Nodes
    outcome: Outcome | tuple[Outcome, ...]
    message: str | None = None

    @field_validator("outcome", mode="before")
    @classmethod
    def _outcomes(cls, value: Any) -> Any:
        return _one_or_more(value)

    elapsed: tuple[float, float] | None = None

    @field_validator("elapsed", mode="before")
    @classmethod
    def _pair(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) != 2:
            raise ValueError("must be [low, high] in seconds")
        return value

    @field_validator("message")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression ({exc})") from exc
        return value

    @field_validator("elapsed")
    @classmethod
    def _bounds(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not 0 <= value[0] <= value[1]:
            raise ValueError("must be [low, high] with 0 <= low <= high")
        return value


class Expect(FormatModel):
    outcome: Outcome | tuple[Outcome, ...] = "ok"
    nodes: list[NodeExpect] = Field(default_factory=list)

    @field_validator("outcome", mode="before")
    @classmethod
    def _outcomes(cls, value: Any) -> Any:
        return _one_or_more(value)


def backend_name(value: str) -> str:
    """``value`` when it names a backend.

    Raises:
        ValueError: it is neither a named backend nor ``module:factory``.
    """
    if value in NAMED_BACKENDS or re.fullmatch(r"[\w.]+:\w+", value):
        return value
    raise ValueError(
        f"unknown backend {value!r}; allowed: 'static', 'torch-static' or 'module:factory'"
    )


def _url(value: str) -> str:
    if not value.startswith(("https://", "http://")):
        raise ValueError("must be a URL (https://...)")
    return value


BackendName = Annotated[str, AfterValidator(backend_name)]
NodeCount = Annotated[int, Field(ge=1, le=256)]


class BackendVariant(FormatModel):
    """How the scenario goes on one backend, where that differs from ``[expect]``.

    ``expect`` replaces the scenario's expectations; ``violates`` lists invariants the
    backend is known to break here (a run that does not break them fails: the record is
    out of date); ``unsupported`` says why the harness cannot run the scenario on it.
    """

    note: str | None = None
    expect: Expect | None = None
    violates: list[Invariant] = Field(default_factory=list)
    unsupported: str | None = None


class Timeouts(FormatModel):
    join: float = Field(default=10.0, gt=0)
    hard: float | None = Field(default=None, gt=0)

    @property
    def hard_deadline(self) -> float:
        """Seconds after which a still-running node is killed and reported ``hung``."""
        return self.hard if self.hard is not None else 2 * self.join + 15


class Endpoint(FormatModel):
    host: str = "127.0.0.1"
    via_proxy: bool = True


class Scenario(FormatModel):
    """One scenario file, validated."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = Field(min_length=1)
    sources: list[Annotated[str, AfterValidator(_url)]] = Field(default_factory=list)
    field_failure: str | None = Field(default=None, pattern=r"^F\d\d$")
    seed: int | None = None
    backend: BackendName = "static"
    nodes: NodeCount
    run_id: str | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    endpoint: Endpoint = Field(default_factory=Endpoint)
    override: list[NodeOverride] = Field(default_factory=list)
    fault: list[Fault] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    backends: dict[BackendName, BackendVariant] = Field(default_factory=dict)
    path: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Scenario:
        """The checks that need the whole scenario; :func:`parse` collects their problems
        (through the validation context) instead of stopping at the first."""
        found = consistency(
            self.nodes,
            self.endpoint,
            list(enumerate(self.fault)),
            list(enumerate(self.override)),
            _expectations(self.expect, self.backends),
        )
        collector = (info.context or {}).get(_COLLECT)
        if isinstance(collector, list):
            collector.extend(found)
        elif found:
            raise ValueError("; ".join(found))
        return self

    def targets(self, nodes: Nodes) -> list[int]:
        """Resolve a node selector: a list, ``"all"`` or ``"others"`` (all but node 0)."""
        return _targets(self.nodes, nodes)

    @property
    def variant(self) -> BackendVariant:
        """What ``[backends.<backend>]`` records for the backend this scenario runs on."""
        return self.backends.get(self.backend) or BackendVariant()

    def on_backend(self, backend: str) -> Scenario:
        """A copy that runs on ``backend``.

        Raises:
            ScenarioError: ``backend`` is not a backend name.
        """
        try:
            backend_name(backend)
        except ValueError as exc:
            raise ScenarioError(self.path or self.name, [f"backend: {exc}"]) from None
        return self.model_copy(update={"backend": backend})

    def expected(self, node: int) -> NodeExpect:
        """The expectation for ``node`` on this backend (the last matching entry wins)."""
        expect = self.variant.expect or self.expect
        found = NodeExpect(nodes=[node], outcome=expect.outcome)
        for entry in expect.nodes:
            if node in self.targets(entry.nodes):
                found = entry
        return found

    def with_seed(self, seed: int) -> Scenario:
        """A copy whose seed is ``seed``."""
        return self.model_copy(update={"seed": seed})


def _expectations(
    expect: Expect, backends: Mapping[str, BackendVariant]
) -> list[tuple[str, NodeExpect]]:
    """Every ``[[expect.nodes]]`` entry, the backends' included, with its key path."""
    found = [(f"expect.nodes[{i}]", e) for i, e in enumerate(expect.nodes)]
    for name, variant in backends.items():
        entries = variant.expect.nodes if variant.expect else []
        found += [(f"backends.{name}.expect.nodes[{i}]", e) for i, e in enumerate(entries)]
    return found


_FAULT: TypeAdapter[Fault] = TypeAdapter(Fault)
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


def _salvaged(data: Mapping[str, Any]) -> list[str]:
    """:func:`consistency` on the parts of an invalid file that are valid on their own."""
    count = _valid(_NODE_COUNT.validate_python, data.get("nodes"))
    if count is None:
        return []
    endpoint = _valid(Endpoint.model_validate, data.get("endpoint", {}))
    expects: list[tuple[str, NodeExpect]] = []
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
    return consistency(
        count,
        endpoint,
        _items(_FAULT.validate_python, data.get("fault")),
        _items(NodeOverride.model_validate, data.get("override")),
        expects,
    )


_COLLECT = "harness.scenario.problems"


def parse(data: Mapping[str, Any], source: str) -> Scenario:
    """Validate an already-parsed TOML mapping.

    Raises:
        ScenarioError: naming ``source`` and every problem: its key path, the bad value and
            what is allowed.
    """
    found: list[str] = []
    try:
        scenario = Scenario.model_validate({**data, "path": source}, context={_COLLECT: found})
    except ValidationError as exc:
        problems = explain(exc.errors(), data) + _salvaged(data)
        raise ScenarioError(source, list(dict.fromkeys(problems))) from None
    if found:
        raise ScenarioError(source, found)
    return scenario


def load(path: str | Path) -> Scenario:
    """Read and validate one scenario file.

    Raises:
        ScenarioError: unreadable file, bad TOML, or invalid contents.
    """
    source = str(path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ScenarioError(source, [f"cannot read the file: {exc.strerror or exc}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, [f"not valid TOML: {exc}"]) from exc
    return parse(data, source)


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
