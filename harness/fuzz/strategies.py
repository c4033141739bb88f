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

import hashlib
import json
from typing import Any

from hypothesis import strategies as st

from harness.fuzz.oracle import expect_for, hard_deadline_for, summary

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


def _tenths(low: float, high: float) -> st.SearchStrategy[float]:
    """Seconds with one decimal in ``[low, high]`` (readable in a written scenario)."""
    return st.integers(round(low * 10), max(round(low * 10), round(high * 10))).map(
        lambda n: n / 10
    )


def _subset(draw: st.DrawFn, pool: list[int], min_size: int = 1) -> list[int]:
    return sorted(draw(st.lists(st.sampled_from(pool), min_size=min_size, unique=True)))


def _links(draw: st.DrawFn, present: list[int]) -> list[int] | str:
    workers = [n for n in present if n != 0]
    if draw(st.booleans()):
        return "others"
    return _subset(draw, workers)


def _trigger(draw: st.DrawFn, present: list[int], join: float) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"at": draw(_tenths(0, join))}
    event = draw(st.sampled_from(["started", "connected", "joined"]))
    return {
        "on": event,
        "on_node": draw(st.sampled_from(present)),
        "after": draw(_tenths(0, 0.5)),
    }


def _toxic(nodes: list[int] | str, kind: str, stream: str, **keys: Any) -> dict[str, Any]:
    return {"kind": "toxic", "nodes": nodes, "type": kind, "stream": stream, **keys}


def _network_fault(draw: st.DrawFn, present: list[int], join: float) -> dict[str, Any]:
    nodes = _links(draw, present)
    stream = draw(st.sampled_from(["upstream", "downstream"]))
    what = draw(
        st.sampled_from(
            ["latency", "slow-latency", "slicer", "noop", "reset_peer", "timeout", "link_down"]
        )
    )
    if what == "latency":  # well under the timeout: a join is ~10 round trips
        latency = draw(st.integers(1, max(1, round(join * 1000 / 100))))
        jitter = draw(st.integers(0, latency // 4))
        return _toxic(nodes, "latency", stream, attributes={"latency": latency, "jitter": jitter})
    if what == "slow-latency":  # at least the timeout: someone must time out or fail
        latency = draw(st.integers(round(join * 1000), round(join * 1500)))
        return _toxic(nodes, "latency", stream, attributes={"latency": latency})
    if what == "slicer":
        size = draw(st.integers(1, 8))
        variation, delay = draw(st.integers(0, size - 1)), draw(st.integers(0, 100))
        attributes = {"average_size": size, "size_variation": variation, "delay": delay}
        return _toxic(nodes, "slicer", "downstream", attributes=attributes)
    if what == "noop":
        return _toxic(nodes, "noop", stream)
    duration = draw(_tenths(0.2, join))
    when = _trigger(draw, present, join)
    if what == "link_down":
        return {"kind": "link_down", "nodes": nodes, "duration": duration, **when}
    toxicity = draw(st.sampled_from([1.0, 0.5]))
    return _toxic(
        nodes,
        what,
        stream,
        attributes={"timeout": 0},
        duration=duration,
        toxicity=toxicity,
        **when,
    )


def _store_fault(draw: st.DrawFn, present: list[int], join: float) -> dict[str, Any]:
    action = draw(st.sampled_from(["delay", "drop", "fail"]))
    fault: dict[str, Any] = {
        "kind": "store_op",
        "nodes": _links(draw, present),
        "op": draw(st.sampled_from(["SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT"])),
        "keys": draw(st.sampled_from(["*", "__rdzv__/*", "*/claim/*", "*/count"])),
        "action": action,
        "count": draw(st.integers(1, 2)),
    }
    if action == "delay":  # two delays of at most join/8 each: well under the timeout
        fault["delay"] = draw(_tenths(0.1, join / 8))
    return fault


def _process_fault(draw: st.DrawFn, present: list[int], join: float) -> dict[str, Any]:
    kind = draw(st.sampled_from(["kill", "pause", "restart"]))
    if kind == "kill":
        return {
            "kind": "kill",
            "nodes": [draw(st.sampled_from(present))],
            **_trigger(draw, present, join),
        }
    if kind == "pause":
        node = draw(st.sampled_from(present))
        duration = draw(_tenths(0.2, 1.5 * join))
        if draw(st.booleans()):  # frozen from its very start (see docs/scenarios.md)
            return {
                "kind": "pause",
                "nodes": [node],
                "on": "started",
                "on_node": node,
                "duration": duration,
            }
        return {
            "kind": "pause",
            "nodes": [node],
            "duration": duration,
            **_trigger(draw, present, join),
        }
    # restart: node 0's replacement would need the store port again, so only workers
    node = draw(st.sampled_from([n for n in present if n != 0]))
    return {
        "kind": "restart",
        "nodes": [node],
        "on": "joined",
        "on_node": node,
        "after": draw(_tenths(0, 0.3)),
        "duration": draw(_tenths(0.1, 1.0)),
    }


@st.composite
def fault_schedules(
    draw: st.DrawFn, nodes: int, join_timeout: float, max_faults: int = 3
) -> list[dict[str, Any]]:
    """Lists of fault tables valid for a scenario of ``nodes`` nodes with that join timeout.

    Kinds: ``absent`` (at most one, never every node), ``late_start`` (well under or past
    the timeout), toxics (latency well under or past the timeout, slicer, noop, reset_peer,
    black-hole timeout), ``link_down``, ``store_op`` (short delays, drops, resets), ``kill``,
    ``pause`` and ``restart``. They respect the scenario validators: no network or store
    fault on node 0, no fault on or triggered by an absent node, no restart of node 0.
    """
    faults: list[dict[str, Any]] = []
    absent: list[int] = []
    if draw(st.booleans()):
        absent = _subset(draw, list(range(nodes)))
        if len(absent) == nodes:
            absent = absent[:-1]
        faults.append({"kind": "absent", "nodes": absent})
    present = [n for n in range(nodes) if n not in absent]
    for _ in range(draw(st.integers(0, max(0, max_faults - len(faults))))):
        family = draw(st.sampled_from(["late", "network", "store", "process"]))
        workers = [n for n in present if n != 0]
        if family in ("network", "store", "process") and not workers:
            family = "late"
        if family == "late":
            far = draw(st.booleans())
            delay = draw(
                _tenths(join_timeout / 2, 1.5 * join_timeout)
                if far
                else _tenths(0.1, join_timeout / 4)
            )
            faults.append({"kind": "late_start", "nodes": _subset(draw, present), "delay": delay})
        elif family == "network":
            faults.append(_network_fault(draw, present, join_timeout))
        elif family == "store":
            faults.append(_store_fault(draw, present, join_timeout))
        else:
            faults.append(_process_fault(draw, present, join_timeout))
    return faults


@st.composite
def ordered_kill_schedules(
    draw: st.DrawFn, nodes: int, join_timeout: float
) -> list[dict[str, Any]]:
    """Fault schedules where a member dies before the round can complete.

    A worker is killed on its own ``joined`` event (``after`` 0-0.5 s), its claim written,
    while other workers start late or never: when the kill lands before a late worker
    starts, no rendezvous may return (``dead_member``, :mod:`harness.fuzz.ordered`). At
    most 3 faults: ``absent`` and one ``late_start`` or two ``late_start``, then the kill;
    one draw in four restarts the member instead (after 0.1-2.5 s), which may complete the
    round legitimately. Late delays are 1.5 s up to the join timeout, or 0.2-1.4 s; the long
    ones first, so shrinking keeps one where it can: in a fresh process (``harness replay``)
    the first nodes start slowly and a member may join only after a short delay passed.

    Raises:
        ValueError: (when drawing) ``nodes`` is below 3 (node 0 hosts the store).
    """
    if nodes < 3:
        raise ValueError(f"ordered_kill_schedules() needs at least 3 nodes, got {nodes}")
    target = draw(st.integers(1, nodes - 1))
    later = _subset(draw, [n for n in range(1, nodes) if n != target])
    absent = [n for n in later if draw(st.booleans())] if draw(st.booleans()) else []
    faults: list[dict[str, Any]] = []
    if absent:
        faults.append({"kind": "absent", "nodes": absent})
    late = [n for n in later if n not in absent]
    split = len(late) > 1 and not absent and draw(st.booleans())
    long, short = _tenths(min(1.5, join_timeout), join_timeout), _tenths(0.2, 1.4)
    for group in (late[:1], late[1:]) if split else (late,):  # each group its own delay
        if group:
            delay = min(join_timeout, draw(long | short))
            faults.append({"kind": "late_start", "nodes": group, "delay": delay})
    death: dict[str, Any] = {
        "kind": "kill",
        "nodes": [target],
        "on": "joined",
        "on_node": target,
        "after": draw(_tenths(0, 0.5)),
    }
    if draw(st.integers(0, 3)) == 3:  # now and then a restart: the round may complete
        death = {**death, "kind": "restart", "duration": draw(_tenths(0.1, 2.5))}
    faults.append(death)
    return faults


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
) -> dict[str, Any]:
    """Whole scenarios as plain dicts, with the expectations :func:`expect_for` derives.

    Small by default (2-5 nodes, join timeout 2-4 s, up to 3 faults). With 3 nodes or more
    (and ``max_faults`` >= 3) about one scenario in three is drawn from
    :func:`ordered_kill_schedules`: a member killed on its own ``joined`` event while others
    start late or never. A misconfigured node
    (duplicate rank or world-size mismatch) comes only with harmless faults, so its outcome
    stays exact. The name is ``fuzz-<hash of the contents>``, stable for equal scenarios;
    ``seed`` is the run seed.

    Raises:
        ValueError: (when drawing) ``min_nodes`` is below 2, ``min_join`` is not positive,
            or a minimum exceeds its maximum.
    """
    if min_nodes < 2 or min_join <= 0 or min_nodes > max_nodes or min_join > max_join:
        raise ValueError(
            f"scenarios() needs 2 <= min_nodes <= max_nodes and 0 < min_join <= max_join; "
            f"got nodes {min_nodes}..{max_nodes}, join {min_join}..{max_join}"
        )
    nodes = draw(st.integers(min_nodes, max_nodes))
    join = draw(_tenths(min_join, max_join))
    override = draw(_overrides(nodes))
    if nodes >= 3 and max_faults >= 3 and not override and draw(st.integers(0, 2)) == 2:
        faults = draw(ordered_kill_schedules(nodes, join))
    else:
        faults = draw(fault_schedules(nodes, join, max_faults))
    if override:
        faults = [f for f in faults if f["kind"] == "late_start" and f["delay"] <= join / 4]
    data: dict[str, Any] = {"nodes": nodes, "timeouts": {"join": join}}
    if override:
        data["override"] = override
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
