"""The scenario format as validated, frozen models; the reference is docs/scenarios.md.

:class:`Scenario` is one file: nodes, timeouts, endpoint, overrides, faults (each validated
as its own kind through :data:`~harness.scenario.faults.registry.FAULTS`), expectations and
per-backend variants. What nodes must report (``[expect]``) is :mod:`harness.scenario.expect`'s
(its names re-exported here). Reading files is :mod:`harness.scenario.load`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.errors import ScenarioError
from harness.scenario.consistency import consistency
from harness.scenario.expect import (
    INVARIANTS,
    OUTCOMES,
    Expect,
    Invariant,
    NodeExpect,
    Outcome,
    allowed_outcomes,
)
from harness.scenario.faults.base import Fault
from harness.scenario.faults.registry import FaultEntry
from harness.scenario.format import FormatModel, Nodes, targets
from harness.scenario.job import Job, PartExpect, fault_parts

__all__ = [
    "COLLECT",
    "INVARIANTS",
    "NAMED_BACKENDS",
    "OUTCOMES",
    "WORLDS",
    "BackendVariant",
    "Endpoint",
    "Expect",
    "Fault",
    "Invariant",
    "NodeCount",
    "NodeExpect",
    "NodeOverride",
    "Outcome",
    "Scenario",
    "Timeouts",
    "WorldName",
    "allowed_outcomes",
    "backend_name",
]

#: The backends the harness knows by name (plus ``module:factory`` for a user's handler).
NAMED_BACKENDS = ("static", "torch-static", "torch-c10d")


class NodeOverride(FormatModel):
    """Per-node deviations from the common configuration (a misconfigured node)."""

    nodes: list[int]
    rank: int | None = Field(default=None, ge=0)
    world_size: int | None = Field(default=None, ge=1)
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)


def backend_name(value: str) -> str:
    """``value`` when it names a backend.

    Raises:
        ValueError: it is neither a named backend nor ``module:factory``.
    """
    if value in NAMED_BACKENDS or re.fullmatch(r"[\w.]+:\w+", value):
        return value
    raise ValueError(
        f"unknown backend {value!r}; allowed: 'static', 'torch-static', 'torch-c10d' or "
        "'module:factory'"
    )


def _url(value: str) -> str:
    if not value.startswith(("https://", "http://")):
        raise ValueError("must be a URL (https://...)")
    return value


#: The worlds a scenario can name (``world = ...``).
WorldName = Literal["local", "netns", "ray"]
WORLDS: tuple[str, ...] = get_args(WorldName)
BackendName = Annotated[str, AfterValidator(backend_name)]
NodeCount = Annotated[int, Field(ge=1, le=16384)]


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

    @field_validator("hard")
    @classmethod
    def _after_join(cls, value: float | None, info: ValidationInfo) -> float | None:
        """A hard deadline at or before the join timeout kills every node that waits its
        timeout out, and reports it ``hung``: an rdzv hang that is the file's doing."""
        join = info.data.get("join")
        if value is not None and join is not None and value <= join:
            raise ValueError(
                f"the hard deadline ({_number(value)} s) must be greater than timeouts.join "
                f"({_number(join)} s): a node still waiting for its join timeout would be "
                "killed and reported hung; raise hard or leave it out (2 x join + 15)"
            )
        return value

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
    #: Nodes per process (>= 2): node 0 stays a process, the others run ``pack`` per process
    #: as threads (the packed world; in the Ray world: nodes per actor). None: one process
    #: per node (in the Ray world: one actor per node up to 17 nodes, else 16 groups).
    pack: int | None = Field(default=None, ge=2)
    #: Where the nodes run: ``local`` (processes on this machine, links through the fault
    #: proxy), ``netns`` (each node in a network namespace of its own, faults in the
    #: kernel) or ``ray`` (Ray actors on the cluster ``harness run --ray-address`` names,
    #: else a local Ray); see docs/scenarios.md "Worlds".
    world: WorldName = "local"
    run_id: str | None = None
    timeouts: Timeouts = Field(default_factory=Timeouts)
    endpoint: Endpoint = Field(default_factory=Endpoint)
    override: list[NodeOverride] = Field(default_factory=list)
    #: Every node a torchrun agent with gloo workers (``[job]``; docs/jobs.md).
    job: Job | None = None
    fault: list[FaultEntry] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    backends: dict[BackendName, BackendVariant] = Field(default_factory=dict)
    path: str | None = Field(default=None, exclude=True)
    #: How the file itself runs (world, backend, pack), kept through the copies that
    #: options make (:meth:`in_world`, ...), so a replay names only what an option changed.
    _written: dict[str, Any] = PrivateAttr(default_factory=dict)

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
        found += _idle_beyond(len(self.fault), self.expect, self.backends)
        found += _timeouts_beyond(self.timeouts, self.override)
        found += _job_problems(self)
        self._written = {key: getattr(self, key) for key in _OPTIONS}
        collector = (info.context or {}).get(COLLECT)
        if isinstance(collector, list):
            collector.extend(found)
        elif found:
            raise ValueError("; ".join(found))
        return self

    def options(self) -> dict[str, Any]:
        """What differs from the file as written, among ``world``, ``backend`` and ``pack``
        (what ``--world``, ``--backend`` and ``--pack`` changed), in that order."""
        written = self._written
        return {k: getattr(self, k) for k in _OPTIONS if written.get(k) != getattr(self, k)}

    def targets(self, nodes: Nodes) -> list[int]:
        """Resolve a node selector: a list, ``"all"`` or ``"others"`` (all but node 0)."""
        return targets(self.nodes, nodes)

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

    @property
    def idle_faults(self) -> frozenset[int]:
        """The indexes of the faults expected not to act on this backend."""
        return frozenset((self.variant.expect or self.expect).idle_faults)

    def expected(self, node: int, rank: int | None = None) -> NodeExpect:
        """The expectation for ``node`` on this backend (the last matching entry wins); with
        ``[expect] by_rank`` the entries name ranks, and ``rank`` is the one the backend gave
        ``node`` (None: no entry applies)."""
        expect = self.variant.expect or self.expect
        found = NodeExpect(nodes=[node], outcome=expect.outcome)
        key = rank if expect.by_rank else node
        for entry in expect.nodes:
            if key is not None and key in self.targets(entry.nodes):
                found = entry
        return found

    def in_world(self, world: str) -> Scenario:
        """A copy that runs in ``world`` (``local``, ``netns`` or ``ray``).

        Raises:
            ScenarioError: ``world`` is not a world's name.
        """
        if world not in WORLDS:
            allowed = ", ".join(WORLDS)
            raise ScenarioError(
                self.path or self.name, [f"world: got {world!r}; allowed: {allowed}"]
            )
        return self.model_copy(update={"world": world})

    def packed(self, pack: int | None) -> Scenario:
        """A copy that runs ``pack`` nodes per process (None: one process per node)."""
        if pack is not None and pack < 2:
            raise ScenarioError(self.path or self.name, [f"pack: must be at least 2, got {pack}"])
        return self.model_copy(update={"pack": pack})


#: The keys of a file that ``harness run`` options can override.
_OPTIONS = ("world", "backend", "pack")


def _expectations(
    expect: Expect, backends: Mapping[str, BackendVariant]
) -> list[tuple[str, NodeExpect | PartExpect]]:
    """Every ``[[expect.nodes]]`` and ``[[expect.parts]]`` entry, the backends' included,
    with its key path."""
    found: list[tuple[str, NodeExpect | PartExpect]] = []
    sections = [("expect", expect)]
    sections += [(f"backends.{name}.expect", v.expect) for name, v in backends.items() if v.expect]
    for where, section in sections:
        found += [(f"{where}.nodes[{i}]", e) for i, e in enumerate(section.nodes)]
        found += [(f"{where}.parts[{i}]", e) for i, e in enumerate(section.parts)]
    return found


def _idle_beyond(count: int, expect: Expect, backends: Mapping[str, BackendVariant]) -> list[str]:
    """``idle_faults`` entries that name no fault, one line each."""
    found = []
    sections = [("expect", expect)]
    sections += [(f"backends.{n}.expect", v.expect) for n, v in backends.items() if v.expect]
    for where, section in sections:
        for i, index in enumerate(section.idle_faults):
            if index >= count:
                has = f"faults 0..{count - 1}" if count else "no fault"
                what = f"fault {index} does not exist; the scenario has {has}"
                found.append(f"{where}.idle_faults[{i}]: {what}")
    return found


def _timeouts_beyond(timeouts: Timeouts, overrides: list[NodeOverride]) -> list[str]:
    """An override's own join timeout (``config.timeout``) that reaches the hard deadline:
    its nodes would be killed and reported ``hung`` before their timeout."""
    hard = timeouts.hard_deadline
    found = []
    for i, override in enumerate(overrides):
        own = override.config.get("timeout")
        if isinstance(own, int | float) and not isinstance(own, bool) and own >= hard:
            said = "timeouts.hard" if timeouts.hard is not None else "2 x timeouts.join + 15"
            found.append(
                f"override[{i}].config.timeout: got {_number(own)}; the hard deadline "
                f"({_number(hard)} s, {said}) must be greater, or its nodes are killed and "
                "reported hung before they time out; raise timeouts.hard"
            )
    return found


def _job_problems(sc: Scenario) -> list[str]:
    """``[job]``'s bounds against the hard deadline, faults aimed at parts no node has, and
    ``[[expect.parts]]`` without a job."""
    found = fault_parts(sc.job, list(enumerate(sc.fault)))
    if sc.job is not None:
        return found + sc.job.problems(sc.timeouts.hard_deadline)
    sections = [("expect", sc.expect)]
    sections += [(f"backends.{n}.expect", v.expect) for n, v in sc.backends.items() if v.expect]
    return found + [
        f"{where}.parts[{i}]: the scenario has no [job] table: only a job's nodes have parts"
        for where, section in sections
        for i, _ in enumerate(section.parts)
    ]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


#: The validation-context key under which :func:`harness.scenario.load.parse` collects
#: the problems :meth:`Scenario._consistent` finds (instead of stopping at the first).
COLLECT = "harness.scenario.problems"
