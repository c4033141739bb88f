"""Property: for a drawn scenario, running it, reading its nodes' logs back with
``from-log`` and running what comes out gives every node the same outcome class (or, where
the written scenario expects one of several, an outcome it allows in both runs: a dropped
request's deadline racing the host's) and names the same missing ranks. Each example is
two real runs, so few are drawn, and only scenarios with a fault (a fault-free run proves
little about reading a failure back), none fired on a node's event and none that begins or
ends near the join timeout (whose outcome the machine's load decides): three by default,
twenty under ``long``, and four in the netns world with one of the kernel's faults under
``netns`` (the logs say the nodes ran in namespaces, so the replay is the netns world's
too)."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from from_log_support import assert_same_outcomes, missing_ranks, no_namespace_left, node_logs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.fuzz.strategies import scenarios
from harness.logs import convert
from harness.run.suite import run_suite
from harness.scenario.load import parse
from harness.world.netns.shell import why_not

_SETTINGS: dict[str, Any] = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


#: The netns world's own faults, carried out by the kernel.
KERNEL = frozenset({"drop", "reject", "partition", "loss", "bandwidth"})
#: The kinds drawn: not the process faults fired on a node's event (kill, pause, restart),
#: whose outcome hinges on timing in the original run itself (a kill 0.2 s after a join
#: lands before or after the round completes), so that a run and its replay could differ
#: for no fault of the log's reading; the shipped files with them (restart-after-join,
#: member-dies-once-the-round-completed, paused-node, ...) are in the per-file round trip.
#: For the same reason no fault of these kinds fired on an event is drawn either (a link
#: down the moment node 2 connected cut node 2's count before or after it landed: node 0
#: ended ok in one run, with a connection error in the next).
STEADY = frozenset({"absent", "late_start", "toxic", "link_down", "store_op"})


#: A fault that begins or ends, or a delay that adds up, within this share of the join
#: timeout either side of it decides the round by how loaded the machine is (healed at 1.7 s
#: of a 2.4 s join: the nodes made it with 0.3 s to spare on a quiet machine and timed out
#: under CI's load; latency 3.2 s per request against a 3.2 s join; a link down at 3.3 s of
#: a 3.4 s join, cutting a waiting node 0.1 s before its deadline): such a run and its
#: replay may differ for no fault of the log's reading, so they are not drawn.
EDGE = 0.5
#: Requests of a join a latency toxic delays, each by its latency (connect, handshake,
#: claims, count: about four; up to six with retries).
_TRIPS = 6


def _moments(fault: dict[str, Any]) -> list[float]:
    """The seconds after the start at which ``fault`` begins (if not at once), stops, or its
    delays add up to."""
    start = float(fault.get("at") or 0.0) + float(fault.get("after") or 0.0)
    moments = [start] if start > 0 else []
    if fault.get("duration"):
        moments.append(start + float(fault["duration"]))
    if fault.get("delay"):
        moments.append(start + float(fault["delay"]))
    attributes = fault.get("attributes") or {}
    per_trip = (attributes.get("latency", 0) + attributes.get("jitter", 0)) / 1000
    moments += [start + n * per_trip for n in range(1, _TRIPS + 1) if per_trip]
    return moments


def clear_of_the_deadline(data: dict[str, Any]) -> bool:
    """Whether no fault of ``data`` ends near its join timeout (:data:`EDGE`)."""
    join = float(data.get("timeouts", {}).get("join", 0.0))
    near = (join * (1 - EDGE), join * (1 + EDGE))
    return not any(
        near[0] <= moment <= near[1] for f in data.get("fault", []) for moment in _moments(f)
    )


def _with_faults(world: str = "local") -> st.SearchStrategy[dict[str, Any]]:
    """Drawn scenarios with a fault, none ending near the join timeout (:data:`EDGE`); in
    the netns world, with one of the kernel's."""
    wanted = KERNEL if world == "netns" else None

    def has_fault(data: dict[str, Any]) -> bool:
        kinds = {f["kind"] for f in data.get("fault", [])}
        return bool(kinds & wanted) if wanted else bool(kinds)

    def steady(data: dict[str, Any]) -> bool:
        return not any(f.get("on") for f in data.get("fault", []))

    kinds = STEADY | KERNEL if world == "netns" else STEADY
    drawn = scenarios(max_nodes=4, max_faults=2, world=world, kinds=kinds)
    return drawn.filter(has_fault).filter(steady).filter(clear_of_the_deadline)


def replays_the_same(data: dict[str, Any]) -> None:
    original = run_suite([parse(data, f"<{data['name']}>")])[0]
    if original.skipped:
        return
    assert original.error is None, original.error
    conversion = convert(node_logs(original.outcomes), name=f"replay-{data['name']}")
    written = tomllib.loads(conversion.text)
    drawn = f"drawn: {data}\nwritten:\n{conversion.text}"
    assert written.get("world", "local") == data.get("world", "local"), drawn
    replay = run_suite([parse(written, "<replay>")])[0]
    assert replay.error is None, f"{replay.error}\n{drawn}"
    assert_same_outcomes(original, replay, conversion.text)
    assert missing_ranks(replay) == missing_ranks(original), drawn


@pytest.mark.slow
@settings(max_examples=3, **_SETTINGS)
@given(_with_faults())
def test_a_drawn_scenarios_logs_replay_with_the_same_outcomes(data: dict[str, Any]) -> None:
    replays_the_same(data)


@pytest.mark.long
@settings(max_examples=20, **_SETTINGS)
@given(_with_faults())
def test_twenty_drawn_scenarios_logs_replay_with_the_same_outcomes(data: dict[str, Any]) -> None:
    replays_the_same(data)


@pytest.mark.netns
@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
@settings(max_examples=4, **_SETTINGS)
@given(data=_with_faults("netns"))
def test_a_drawn_netns_scenarios_logs_replay_in_the_netns_world(data: dict[str, Any]) -> None:
    with no_namespace_left():
        replays_the_same(data)


def test_a_heal_read_from_the_logs_is_replayed_no_later_than_it_happened() -> None:
    """A node refused until its link heals connects on its next retry, up to a backoff pause
    (a second at most) after the heal; the log shows its last refused attempt and its
    connect. The replay ends the fault at the earliest the log allows (the last refused
    attempt), never at the connect: the replay's own, random, pause would then come on top
    and could push its connect past the deadline the original met (a flaky example of the
    property above: healed at 1.7 s, connected at 1.9 s, replayed healing at 1.9 s)."""
    data = {
        "name": "heal",
        "description": "node 1 refused for 1.7 s of a 6 s join",
        "nodes": 2,
        "timeouts": {"join": 6.0},
        "fault": [{"kind": "link_down", "nodes": [1], "at": 0.0, "duration": 1.7}],
        "expect": {"outcome": "ok"},
    }
    original = run_suite([parse(data, "<heal>")])[0]
    assert original.error is None and original.passed, original.error or original.violations
    written = tomllib.loads(convert(node_logs(original.outcomes), name="replay").text)
    (fault,) = written["fault"]
    assert (fault["kind"], fault["nodes"]) == ("link_down", [1])
    assert 0.5 <= fault["duration"] <= 1.7, fault  # the last refusal came before the heal


def test_faults_that_begin_or_end_near_the_join_timeout_are_not_drawn() -> None:
    """The two examples that failed in CI and one that failed a local hunt (their outcome
    hinged on load) are excluded; a fault well before or well past the deadline is kept."""
    healed_late = {
        "timeouts": {"join": 2.4},
        "fault": [{"kind": "link_down", "nodes": "others", "at": 0.0, "duration": 1.7}],
    }
    slow_as_the_deadline = {
        "timeouts": {"join": 3.2},
        "fault": [{"kind": "toxic", "type": "latency", "attributes": {"latency": 3200}}],
    }
    cut_at_the_deadline = {
        "timeouts": {"join": 3.4},
        "fault": [{"kind": "link_down", "nodes": "others", "at": 3.3, "duration": 2.3}],
    }
    assert not clear_of_the_deadline(healed_late)
    assert not clear_of_the_deadline(slow_as_the_deadline)
    assert not clear_of_the_deadline(cut_at_the_deadline)
    healed_early = {"timeouts": {"join": 6.0}, "fault": [{"kind": "link_down", "duration": 1.7}]}
    never_in_time = {"timeouts": {"join": 2.0}, "fault": [{"kind": "late_start", "delay": 9.0}]}
    absent = {"timeouts": {"join": 2.0}, "fault": [{"kind": "absent", "nodes": [1]}]}
    for data in (healed_early, never_in_time, absent):
        assert clear_of_the_deadline(data), data
