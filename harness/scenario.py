"""Scenario files: TOML -> validated, frozen models. The format reference is docs/scenarios.md.

Validation rejects unknown keys and bad values; a :class:`~harness.errors.ScenarioError`
names the file, the key path (``fault[2].type``) and what is allowed.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.errors import ScenarioError
from harness.faults import (
    FAULT_KINDS,
    AbsentFault,
    DnsFault,
    Fault,
    FormatModel,
    LateStartFault,
    LinkFault,
    Nodes,
    ProcessFault,
    SquatterFault,
    StoreOpFault,
    ToxicFault,
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
            raise ValueError(f"elapsed must be [low, high] with 0 <= low <= high, got {value}")
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
    sources: list[str] = Field(default_factory=list)
    field_failure: str | None = Field(default=None, pattern=r"^F\d\d$")
    seed: int | None = None
    backend: str = "static"
    nodes: int = Field(ge=1, le=256)
    run_id: str | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    endpoint: Endpoint = Field(default_factory=Endpoint)
    override: list[NodeOverride] = Field(default_factory=list)
    fault: list[Fault] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    backends: dict[str, BackendVariant] = Field(default_factory=dict)
    path: str | None = Field(default=None, exclude=True)

    @field_validator("sources")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("https://", "http://")):
                raise ValueError(f"a source must be a URL, got {url!r}")
        return value

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        return backend_name(value)

    @field_validator("backends")
    @classmethod
    def _backend_keys(cls, value: dict[str, BackendVariant]) -> dict[str, BackendVariant]:
        for name in value:
            backend_name(name)
        return value

    @model_validator(mode="after")
    def _node_indexes(self) -> Scenario:
        def check(where: str, nodes: Nodes) -> None:
            if isinstance(nodes, list):
                for index in nodes:
                    if not 0 <= index < self.nodes:
                        raise ValueError(
                            f"{where} names node {index}, but the scenario has nodes "
                            f"0..{self.nodes - 1}"
                        )

        for i, fault in enumerate(self.fault):
            if hasattr(fault, "nodes"):
                check(f"fault[{i}].nodes", fault.nodes)
            on_node = getattr(fault, "on_node", None)
            if on_node is not None:
                check(f"fault[{i}].on_node", [on_node])
        for i, override in enumerate(self.override):
            check(f"override[{i}].nodes", override.nodes)
        for i, node_expect in enumerate(self.expect.nodes):
            check(f"expect.nodes[{i}].nodes", node_expect.nodes)
        for name, variant in self.backends.items():
            for i, node_expect in enumerate(variant.expect.nodes if variant.expect else []):
                check(f"backends.{name}.expect.nodes[{i}].nodes", node_expect.nodes)
        self._faults_are_applicable()
        return self

    def _faults_are_applicable(self) -> None:
        absent = {n for f in self.fault if isinstance(f, AbsentFault) for n in f.nodes}
        squatters = 0
        for i, fault in enumerate(self.fault):
            where = f"fault[{i}]"
            if isinstance(fault, ToxicFault | LinkFault | StoreOpFault) and 0 in self.targets(
                fault.nodes
            ):
                raise ValueError(
                    f"{where}.nodes includes node 0, which hosts the store and reaches it "
                    "without a link; target other nodes (the default 'others' does)"
                )
            if isinstance(fault, ToxicFault | LinkFault) and not self.endpoint.via_proxy:
                raise ValueError(
                    f"{where} is a network fault but endpoint.via_proxy is false; "
                    "network faults need each node's proxy link"
                )
            if isinstance(fault, DnsFault) and _is_ip_literal(self.endpoint.host):
                raise ValueError(
                    f"{where} is a DNS fault but endpoint.host {self.endpoint.host!r} is an "
                    "IP address; give the endpoint a host name (e.g. 'store.rdzv.test')"
                )
            if isinstance(fault, SquatterFault):
                squatters += 1
                if squatters > 1:
                    raise ValueError(f"{where}: only one squatter can hold node 0's port")
            if isinstance(fault, LateStartFault | ProcessFault) and absent & set(fault.nodes):
                raise ValueError(
                    f"{where} targets node(s) {sorted(absent & set(fault.nodes))}, which an "
                    "'absent' fault never starts"
                )
            on_node = getattr(fault, "on_node", None)
            if on_node is not None and on_node in absent:
                raise ValueError(f"{where}.on_node {on_node} is absent: the trigger never fires")

    def targets(self, nodes: Nodes) -> list[int]:
        """Resolve a node selector: a list, ``"all"`` or ``"others"`` (all but node 0)."""
        if nodes == "all":
            return list(range(self.nodes))
        if nodes == "others":
            return list(range(1, self.nodes))
        return sorted(set(nodes))

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


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _key_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in FAULT_KINDS:
            continue  # the discriminator value pydantic inserts in union paths
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _explain(error: Mapping[str, Any]) -> str:
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "string_pattern_mismatch":
        return f"got {error.get('input')!r}; must match the pattern {ctx.get('pattern')}"
    if kind == "union_tag_invalid":
        return f"kind: got {ctx.get('tag')!r}; allowed: {ctx.get('expected_tags')}"
    if kind == "literal_error":
        expected = ctx.get("expected") or ctx.get("expected_tags")
        return f"got {error.get('input')!r}; allowed: {expected}"
    return str(error.get("msg", "invalid value"))


def parse(data: Mapping[str, Any], source: str) -> Scenario:
    """Validate an already-parsed TOML mapping.

    Raises:
        ScenarioError: naming ``source``, each bad key path and what is allowed.
    """
    try:
        return Scenario.model_validate({**data, "path": source})
    except ValidationError as exc:
        problems = [f"{_key_path(e['loc'])}: {_explain(e)}" for e in exc.errors()]
        raise ScenarioError(source, problems) from None


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

    Raises:
        ScenarioError: any file is invalid, or a path names nothing.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(path.rglob("*.toml")))
        elif path.is_file():
            files.append(path)
        else:
            raise ScenarioError(str(path), ["no such file or directory"])
    return [load(f) for f in files]
