"""Hypothesis strategies: rendezvous endpoints, fault schedules and whole scenarios.

Every scenario strategy yields a plain ``dict`` that :func:`harness.scenario.model.parse` accepts
and ``tomli_w`` writes unchanged, with an ``expect`` table computed by the oracle
:func:`expect_for` from the faults (see :mod:`harness.fuzz.oracle` for the rules).

    from hypothesis import given
    from harness.fuzz.strategies import scenarios

    @given(scenarios(max_nodes=3))
    def test_something(data): ...
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import strategies as st

from harness.fuzz.oracle import expect_for, faults_of, hard_deadline_for, outline_of, summary
from harness.fuzz.ordered import ordered_kill_schedules, ordered_kills_fit
from harness.run.worlds import capabilities_of
from harness.scenario.faults.base import Fault, Whole
from harness.scenario.faults.draws import tenths
from harness.scenario.faults.fuzzing import Outline
from harness.scenario.faults.registry import FAULTS

__all__ = [
    "endpoints",
    "expect_for",
    "fault_schedules",
    "host_names",
    "ordered_kill_schedules",
    "scenarios",
    "valid_endpoints",
]

_MAX_PORT = 65535
_LABEL = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\Z", fullmatch=True)


def host_names() -> st.SearchStrategy[str]:
    """DNS-style host names: 1-4 dot-separated ASCII labels (e.g. ``node-0.rdzv.test``)."""
    return st.lists(_LABEL, min_size=1, max_size=4).map(".".join)


def _ports() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([0, 1, 29400, _MAX_PORT]), st.integers(0, _MAX_PORT))


@st.composite
def valid_endpoints(draw: st.DrawFn) -> tuple[str, int | None, str]:
    """``(host, port, text)``: ``text`` is the endpoint rdzv must parse back into ``host`` and
    ``port`` (``None``: no port written, the parser returns its default port).

    Hosts are DNS names, IPv4 and IPv6 addresses (IPv6 always bracketed in ``text``); the
    text may carry surrounding whitespace, which the parser strips.
    """
    kind = draw(st.sampled_from(["name", "ipv4", "ipv6"]))
    if kind == "name":
        host = draw(host_names())
    elif kind == "ipv4":
        host = str(draw(st.ip_addresses(v=4)))
    else:
        host = str(draw(st.ip_addresses(v=6)))
    port = draw(st.none() | _ports())
    shown = f"[{host}]" if kind == "ipv6" else host
    text = shown if port is None else f"{shown}:{port}"
    pad = st.sampled_from(["", " ", "\t", "\n "])
    return host, port, f"{draw(pad)}{text}{draw(pad)}"


_JUNK_PIECES = st.sampled_from(
    [":", "::", "[", "]", "[]", "%", "%eth0", " ", "\t", "-", ".", "..", "_", "é", "名", "\x00"]
)


@st.composite
def _bare_ipv6(draw: st.DrawFn) -> str:
    """An IPv6 address without brackets, sometimes with a ':port' glued on (ambiguous)."""
    text = str(draw(st.ip_addresses(v=6)))
    if draw(st.booleans()):
        text += f":{draw(_ports())}"
    return text


@st.composite
def _bad_port(draw: st.DrawFn) -> str:
    host = draw(host_names() | st.ip_addresses(v=4).map(str))
    port = draw(
        st.one_of(
            st.integers(max_value=-1).map(str),
            st.integers(_MAX_PORT + 1, 99999).map(str),
            st.integers(100000, 10**12).map(str),
            st.sampled_from(["", "http", "80a", "+80", " 80", "٣"]),
        )
    )
    return f"{host}:{port}"


@st.composite
def _spliced(draw: st.DrawFn) -> str:
    """A valid endpoint with junk inserted at a random place."""
    _, _, text = draw(valid_endpoints())
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(_JUNK_PIECES) + text[at:]


def endpoints() -> st.SearchStrategy[str]:
    """Endpoint strings for :func:`rdzv.endpoint.parse_rendezvous_endpoint`, valid or not:
    names, IPv4, IPv6 bracketed and bare, with and without ports, ports out of range
    (negative, above 65535, too many digits), junk (whitespace, unicode, empty, stray colons
    and brackets) and arbitrary text."""
    return st.one_of(
        valid_endpoints().map(lambda found: found[2]),
        _bare_ipv6(),
        _bad_port(),
        _spliced(),
        st.lists(_JUNK_PIECES | _LABEL, max_size=6).map("".join),
        st.text(max_size=40),
    )


# --- fault schedules ---------------------------------------------------------------------


def _kinds() -> list[type[Fault]]:
    """Every registered fault kind's class, once each, in registration order."""
    return list(dict.fromkeys(k for k in map(FAULTS.get, FAULTS.kinds()) if k is not None))


def _names(kind: type[Fault]) -> frozenset[str]:
    """Every ``kind`` name registered for the class ``kind`` (a toxic class has several)."""
    return frozenset(name for name in FAULTS.kinds() if FAULTS.get(name) is kind)


def check_kinds(kinds: Iterable[str]) -> frozenset[str]:
    """``kinds`` as a set of registered fault kinds.

    Raises:
        ValueError: a name is not a registered kind (the message lists them), or none given.
    """
    wanted = frozenset(kinds)
    if (what := FAULTS.unknown(wanted)) is not None:
        raise ValueError(f"{what}; the kinds are: {FAULTS.listing()}")
    return wanted


def _of_kinds(kinds: frozenset[str]) -> Callable[[dict[str, Any]], bool]:
    return lambda table: table["kind"] in kinds


def kinds_for(world: str, kinds: Iterable[str]) -> frozenset[str]:
    """``kinds`` checked for a fuzz session in ``world``.

    Raises:
        ValueError: a name is not a registered kind, none is given, or ``world`` cannot
            carry out one of them (the message says which and why).
    """
    wanted = check_kinds(kinds)
    capabilities = capabilities_of(world)
    unfit = []
    for name in sorted(wanted):
        kind = FAULTS.get(name)
        if kind is not None and not kind.needs <= capabilities:
            unfit.append(f"{name} (needs {', '.join(sorted(kind.needs - capabilities))})")
    if unfit:
        raise ValueError(f"the {world} world cannot carry out {'; '.join(unfit)}")
    return wanted


def _options(
    outline: Outline, kinds: frozenset[str] | None = None
) -> list[st.SearchStrategy[dict[str, Any]]]:
    """What each kind the world can carry out draws in a scenario of ``outline`` (only the
    kinds named in ``kinds``, when given)."""
    found = []
    for kind in _kinds():
        names = _names(kind)
        if kind.needs <= outline.capabilities and (kinds is None or names & kinds):
            drawn = kind.draw(outline)
            if drawn is not None and kinds is not None and not names <= kinds:
                drawn = drawn.filter(_of_kinds(kinds))
            if drawn is not None:
                found.append(drawn)
    return found


def _keepable(outline: Outline, faults: list[Fault]) -> frozenset[int]:
    """The nodes that start which may still be kept from starting: no fault of ``faults``
    objects (its kind's :meth:`~Fault.check`) or waits for one of their events."""
    pairs = list(enumerate(faults))

    def may(node: int) -> bool:
        whole = Whole(outline.count, None, pairs, outline.absent | {node})
        for index, fault in pairs:
            trigger = fault.when()
            if fault.check(index, whole) or (trigger is not None and trigger.on_node == node):
                return False
        return True

    return frozenset(n for n in outline.present if may(n))


def _after(outline: Outline, faults: list[Fault]) -> Outline:
    """``outline`` once ``faults`` are drawn: who never starts, who may still be kept away."""
    absent = frozenset(n for fault in faults for n in fault.never_starts())
    moved = dataclasses.replace(outline, absent=outline.absent | absent)
    return dataclasses.replace(moved, free=_keepable(moved, faults))


@st.composite
def fault_schedules(
    draw: st.DrawFn,
    nodes: int,
    join_timeout: float,
    max_faults: int = 3,
    world: str = "local",
    kinds: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """Lists of fault tables valid for a scenario of ``nodes`` nodes with that join timeout,
    run in ``world``.

    Each fault is drawn by its kind (:meth:`~harness.scenario.faults.base.Fault.draw`):
    any registered kind whose ``needs`` the world's capabilities satisfy and which draws
    itself there (in the local world ``absent``, ``late_start``, toxics, ``link_down``,
    ``store_op``, ``kill``, ``pause`` and ``restart``; in the netns world the packet rules
    and ``bandwidth`` instead of the proxy's faults). A kind drawn later knows the faults
    drawn before: no fault on or triggered by a node that never starts, and no node kept
    from starting that a fault before it needs. ``kinds`` (when given) limits the draw to
    those fault kinds.

    Raises:
        ValueError: (when drawing) ``world`` is a world whose capabilities are unknown.
    """
    outline = Outline(nodes, join_timeout, capabilities_of(world))
    tables: list[dict[str, Any]] = []
    faults: list[Fault] = []
    for _ in range(draw(st.integers(0, max_faults))):
        options = _options(outline, kinds)
        if not options:
            break
        table = draw(draw(st.sampled_from(options)))
        fault = FAULTS.validate(table)
        tables.append(_tidy(table, fault))
        faults.append(fault)
        outline = _after(outline, faults)
    return tables


#: Where a key goes in a written fault table: the kind first, when it acts last.
_LAST = ("at", "on", "on_node", "after", "duration")


def _tidy(table: dict[str, Any], fault: Fault) -> dict[str, Any]:
    """``table`` with its keys in the order a person writes them: ``kind``, then the kind's
    own keys in the order its class declares them, then when it acts and for how long."""
    fields = list(type(fault).model_fields)

    def place(key: str) -> tuple[int, int]:
        at = fields.index(key) if key in fields else len(fields)
        return (0 if key == "kind" else 2 if key in _LAST else 1, at)

    return {key: table[key] for key in sorted(table, key=place)}


@st.composite
def _overrides(draw: st.DrawFn, nodes: int) -> list[dict[str, Any]]:
    """At most one misconfigured worker: a duplicate rank or a larger world size."""
    if draw(st.integers(0, 3)) != 3:  # (the simplest draw, 0, means no override)
        return []
    node = draw(st.integers(1, nodes - 1))
    if nodes >= 3 and draw(st.booleans()):
        rank = draw(st.sampled_from([r for r in range(1, nodes) if r != node]))
        return [{"nodes": [node], "rank": rank}]
    return [{"nodes": [node], "world_size": nodes + draw(st.integers(1, 2))}]


def _name(data: dict[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True).encode()
    return f"fuzz-{hashlib.sha256(blob).hexdigest()[:10]}"


@st.composite
def scenarios(
    draw: st.DrawFn,
    min_nodes: int = 2,
    max_nodes: int = 5,
    min_join: float = 2.0,
    max_join: float = 4.0,
    max_faults: int = 3,
    world: str = "local",
    kinds: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Whole scenarios as plain dicts, with the expectations :func:`expect_for` derives,
    run in ``world`` (``local`` or ``netns``: the faults are those its capabilities allow,
    :func:`fault_schedules`).

    Small by default (2-5 nodes, join timeout 2-4 s, up to 3 faults). With 3 nodes or more
    (and ``max_faults`` >= 3) about one scenario in three is drawn from
    :func:`ordered_kill_schedules`: a member killed on its own ``joined`` event while others
    start late or never. A misconfigured node (duplicate rank or world-size mismatch) comes
    only with faults whose kinds call them harmless, so its outcome stays exact. The name is
    ``fuzz-<hash of the contents>``, stable for equal scenarios; ``seed`` is the run seed.
    ``kinds`` (when given) limits the faults to those kinds; the misconfigured node and the
    ordered kills come only when their kinds are among them.

    Raises:
        ValueError: (when drawing) ``min_nodes`` is below 2, ``min_join`` is not positive,
            a minimum exceeds its maximum, or ``world``'s capabilities are unknown.
    """
    if min_nodes < 2 or min_join <= 0 or min_nodes > max_nodes or min_join > max_join:
        raise ValueError(
            f"scenarios() needs 2 <= min_nodes <= max_nodes and 0 < min_join <= max_join; "
            f"got nodes {min_nodes}..{max_nodes}, join {min_join}..{max_join}"
        )
    capabilities = capabilities_of(world)
    nodes = draw(st.integers(min_nodes, max_nodes))
    join = draw(tenths(min_join, max_join))
    override = draw(_overrides(nodes)) if kinds is None else []
    ordered = nodes >= 3 and max_faults >= 3 and ordered_kills_fit(capabilities, kinds)
    if ordered and not override and draw(st.integers(0, 2)) == 2:
        faults = draw(ordered_kill_schedules(nodes, join))
    else:
        faults = draw(fault_schedules(nodes, join, max_faults, world, kinds))
    data: dict[str, Any] = {"nodes": nodes}
    if world != "local":
        data["world"] = world
    data["timeouts"] = {"join": join}
    if override:
        data["override"] = override
        data["fault"] = faults
        outline = outline_of(data)
        kept = [
            table
            for table, fault in zip(faults, faults_of(data), strict=True)
            if fault.effect(outline).harmless and not fault.never_starts()
        ]
        faults = kept
    data["fault"] = faults
    data["seed"] = draw(st.integers(0, 2**32 - 1))
    data["timeouts"]["hard"] = hard_deadline_for(data)
    data["expect"] = expect_for(data)
    name = _name(data)
    return {
        "name": name,
        "description": f"Generated by harness.fuzz.strategies: {summary(data)}.",
        **data,
    }
