"""A node is one incarnation at a time, whatever process faults meet on it (issue 30).

``fuzz_data/two-restarts-one-event.toml`` is the scenario ``harness fuzz --seed 20261204
--budget 400`` shrank: two restarts of node 2 on one event each started a replacement, and
rdzv (rightly) reported rank 2 claimed by two live processes. Process faults that meet on a
node now act on what the other left: a second restart merges with the pending one, a kill
cancels it, a pause finds the node down; every record says which happened.

The property test draws kills, restarts and pauses of one node at the same or close
instants and watches the world (local, and packed 2 per process): each time a world verb
returns and each time a node says ``ready``, no node has two incarnations running -- by the
world's own count and, in the local world, by the processes themselves (psutil; a packed
node's incarnations share their process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from harness.run.model import Report
from harness.run.runner import run_scenario
from harness.run.suite import embedded_proxy, run_one
from harness.scenario.load import load, parse
from harness.world.base import Launch, Layout, OnMessage, World, WorldFactory
from harness.world.local import LocalWorlds
from harness.world.messages import Message, Ready
from harness.world.packed import PackedWorlds

DATA = Path(__file__).resolve().parent / "fuzz_data"
NODE = 1  # the node the faults meet on
#: How long a process killed by the harness may take to be gone (a liveness bound only).
_DYING = 10.0


def _problems(report: Report) -> str:
    lines = [report.error or "", *(v.message for v in report.violations)]
    lines += [f"node {o.node}: {o.status} {o.message}" for o in report.outcomes if o.message]
    return "\n".join(lines)


def _effects(report: Report) -> dict[int, dict[str, int]]:
    return {f.index: dict(f.acted or {}) for f in report.faults}


def _run(faults: list[dict[str, Any]], seed: int = 1) -> Report:
    """Run ``faults`` on 4 nodes, node 3 absent (after them: their indexes stay): the round
    cannot complete, so node 1 is still running when its own ``joined`` triggers them (the
    last to join, it could return and exit before a restart's kill reached it)."""
    data = {
        "name": "one-incarnation",
        "description": "process faults meeting on one node",
        "nodes": 4,
        "timeouts": {"join": 2.0},
        "fault": [*faults, {"kind": "absent", "nodes": [3]}],
    }
    return run_one(parse(data, "<one incarnation>"), embedded_proxy, seed)


@pytest.mark.parametrize("pack", [None, 2], ids=["local", "packed"])
def test_two_restarts_of_a_node_on_one_event_start_one_replacement(pack: int | None) -> None:
    scenario = load(DATA / "two-restarts-one-event.toml").packed(pack)

    report = run_one(scenario, embedded_proxy, 0)

    assert report.passed, _problems(report)
    assert not any("duplicate rank" in (o.message or "") for o in report.outcomes)
    effects = _effects(report)
    assert effects[1] == {"nodes killed": 1, "nodes restarted": 1}
    assert effects[2] == {"restarts merged with fault[1]'s (the node starts once)": 1}


@pytest.mark.parametrize("pack", [None, 2], ids=["local", "packed"])
def test_process_fault_pairs_at_one_instant_act_in_file_order_on_what_the_first_left(
    pack: int | None,
) -> None:
    scenario = load(DATA / "process-faults-meet-on-one-node.toml").packed(pack)

    report = run_one(scenario, embedded_proxy, 0)

    assert report.passed, _problems(report)  # node 1 killed: its restart cancelled
    assert _effects(report) == {
        0: {"nodes killed": 1},  # node 1: a restart, then a kill
        1: {"restarts cancelled (fault[0]'s: the node stays down)": 1},
        2: {"nodes killed": 1},  # node 2: a kill, then a restart
        3: {"nodes restarted": 1},
        4: {"nodes killed": 1, "nodes restarted": 1},  # node 3: a restart, then a pause
        5: {},
        6: {"nodes paused": 1},  # node 4: a pause, then a restart
        7: {"nodes killed": 1, "nodes restarted": 1},
        8: {"nodes paused": 1},  # node 5: a pause, then a kill
        9: {"nodes killed": 1},
        10: {"nodes never started": 1},  # node 6: the round cannot complete before they act
    }
    assert report.faults[5].note == "node 3 was down, fault[4]'s start pending"
    assert not any("duplicate rank" in (o.message or "") for o in report.outcomes)
    (node1,) = [o for o in report.outcomes if o.node == 1]  # the runner's own SIGKILL
    assert node1.status == "killed" and "fault[0]'s restart cancelled" in (node1.message or "")


def test_a_kill_of_a_node_whose_restart_is_pending_cancels_the_restart() -> None:
    restart = {"kind": "restart", "nodes": [NODE], "on": "joined", "on_node": NODE}
    kill = {"kind": "kill", "nodes": [NODE], "on": "joined", "on_node": NODE, "after": 0.1}

    report = _run([{**restart, "duration": 1.0}, kill])

    assert report.outcomes[NODE].status == "killed"
    assert "fault[0]'s restart cancelled" in (report.outcomes[NODE].message or "")
    effects = _effects(report)
    assert effects[0] == {"nodes killed": 1}  # its replacement never started
    assert effects[1] == {"restarts cancelled (fault[0]'s: the node stays down)": 1}


def test_a_pause_of_a_node_whose_restart_is_pending_says_the_node_was_down() -> None:
    restart = {"kind": "restart", "nodes": [NODE], "on": "joined", "on_node": NODE}
    pause = {"kind": "pause", "nodes": [NODE], "on": "joined", "on_node": NODE, "after": 0.1}

    report = _run([{**restart, "duration": 0.5}, {**pause, "duration": 0.2}])

    pause_record = report.faults[1]
    assert pause_record.idle
    assert pause_record.note == f"node {NODE} was down, fault[0]'s start pending"
    assert _effects(report)[0] == {"nodes killed": 1, "nodes restarted": 1}


def test_a_restart_of_a_node_launched_paused_starts_its_replacement_running() -> None:
    pause = {"kind": "pause", "nodes": [NODE], "on": "started", "on_node": NODE, "duration": 0.2}
    restart = {"kind": "restart", "nodes": [NODE], "on": "joined", "on_node": NODE}

    report = _run([pause, restart])

    # the replacement was launched paused too, and nothing resumed it: hung
    assert report.outcomes[NODE].status != "hung", _problems(report)
    assert _effects(report)[1] == {"nodes killed": 1, "nodes restarted": 1}


# --- the property: never two live incarnations of a node ------------------------------


class _Watch:
    """What a watched run saw go wrong (filled on the runner's and the reader's threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.problems: list[str] = []
        self.pids: dict[int, list[int]] = {}  # node -> the PIDs of its incarnations, in order
        self.killed: set[int] = set()  # PIDs the harness killed through the world
        self.resumed: list[int] = []  # the nodes resumed through the world, in order

    def saw(self, problem: str) -> None:
        with self.lock:
            self.problems.append(problem)


class _Watched:
    """A world that checks, after each node verb, that no node has two live incarnations."""

    def __init__(self, inner: World, watch: _Watch) -> None:
        self._inner = inner
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _checked(self, verb: str, node: int, act: Callable[[], Any]) -> Any:
        result = act()
        live = self._inner.live(node)
        if live > 1:
            self._watch.saw(f"after {verb}({node}) the world counts {live} live incarnations")
        return result

    def start(self, launch: Launch) -> None:
        running = self._inner.live(launch.node)
        if running:  # the runner must have ended it (the world's own kill is a safety net)
            self._watch.saw(f"start({launch.node}) while {running} incarnation(s) of it run")
        self._checked("start", launch.node, lambda: self._inner.start(launch))

    def kill(self, node: int) -> bool:
        with self._watch.lock:
            pids = self._watch.pids.get(node, [])[-1:]
        killed: bool = self._checked("kill", node, lambda: self._inner.kill(node))
        if killed:
            with self._watch.lock:
                self._watch.killed.update(pids)
        return killed

    def pause(self, node: int) -> bool:
        paused: bool = self._checked("pause", node, lambda: self._inner.pause(node))
        return paused

    def resume(self, node: int) -> bool:
        with self._watch.lock:
            self._watch.resumed.append(node)
        resumed: bool = self._checked("resume", node, lambda: self._inner.resume(node))
        return resumed


def _on_ready(watch: _Watch, message: Message) -> None:
    """A node process said ``ready``: every earlier process of that node must be gone, or
    be dying from a kill the harness sent (then it must end within :data:`_DYING`)."""
    if not isinstance(message, Ready):
        return
    node, pid = message.node, message.pid
    with watch.lock:
        earlier = [p for p in watch.pids.get(node, []) if p != pid]
        watch.pids.setdefault(node, []).append(pid)
        killed = set(watch.killed)
    for old in earlier:
        try:
            process = psutil.Process(old)
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if old in killed:
                process.wait(_DYING)  # an event: the kill lands
                continue
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            continue
        watch.saw(f"node {node} said ready as pid {pid} while its pid {old} still runs")


class _WatchedWorlds:
    def __init__(self, inner: WorldFactory, watch: _Watch) -> None:
        self._inner = inner
        self._watch = watch
        self.name = inner.name
        self.capabilities = inner.capabilities

    def __call__(self, layout: Layout, on_message: OnMessage) -> World:
        def seen(message: Message) -> None:
            _on_ready(self._watch, message)
            on_message(message)

        world: Any = _Watched(self._inner(layout, seen), self._watch)
        return world  # a World by delegation


@contextmanager
def _watched(pack: int | None) -> Iterator[tuple[_WatchedWorlds, _Watch]]:
    """The local world (``pack`` None: a process per node), or the packed world, watched."""
    watch = _Watch()
    with embedded_proxy() as client:
        inner = LocalWorlds(client) if pack is None else PackedWorlds(client, pack)
        yield _WatchedWorlds(inner, watch), watch


#: Few instants, so that faults often meet: on one event, a moment apart, or at a time.
_WHEN = st.sampled_from(
    [
        {"on": "joined", "on_node": NODE, "after": 0.0},
        {"on": "joined", "on_node": NODE, "after": 0.05},
        {"at": 0.1},
    ]
)
_FAULT = st.one_of(
    st.fixed_dictionaries({"kind": st.just("restart"), "duration": st.sampled_from([0.05, 0.1])}),
    st.fixed_dictionaries({"kind": st.just("kill")}),
    st.fixed_dictionaries({"kind": st.just("pause"), "duration": st.sampled_from([0.05, 0.3])}),
)
_ON_JOINED = {"on": "joined", "on_node": NODE, "after": 0.0, "nodes": [NODE]}
_FAULTS = st.lists(
    st.tuples(_FAULT, _WHEN).map(lambda pair: {**pair[0], **pair[1], "nodes": [NODE]}),
    min_size=2,
    max_size=4,
)


@pytest.mark.slow
@pytest.mark.parametrize("pack", [None, 2], ids=["local", "packed"])
@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_FAULTS)
@example([{"kind": "restart", "duration": 0.1, **_ON_JOINED}] * 2)  # issue 30's pair
@example([{"kind": "restart", "duration": 0.05, **_ON_JOINED}, {"kind": "kill", **_ON_JOINED}])
def test_process_faults_meeting_on_a_node_never_leave_it_two_live_incarnations(
    pack: int | None, faults: list[dict[str, Any]]
) -> None:
    data = {
        "name": "overlapping-faults",
        "description": "kills, restarts and pauses of one node at close instants",
        "nodes": 3,
        "timeouts": {"join": 2.0, "hard": 12.0},
        "fault": faults,
    }
    note(tomli_w.dumps(data))
    with _watched(pack) as (worlds, watch):
        report = run_scenario(parse(data, "<overlapping>"), worlds, seed=1)

    assert watch.problems == []
    assert report.error is None, report.error
    assert not any("duplicate rank" in (o.message or "") for o in report.outcomes), _problems(
        report
    )
    assert report.outcomes[NODE].status != "hung", _problems(report)


@pytest.mark.parametrize("pack", [None, 2], ids=["local", "packed"])
def test_two_pauses_of_a_node_that_overlap_hold_it_until_the_later_one_ends(
    pack: int | None,
) -> None:
    pause = {"kind": "pause", "nodes": [NODE], "on": "joined", "on_node": NODE}
    data = {
        "name": "overlapping-pauses",
        "description": "two pauses of one node on one event, 0.2 s and 1 s",
        "nodes": 3,
        "timeouts": {"join": 2.0},
        "fault": [{**pause, "duration": 0.2}, {**pause, "duration": 1.0}],
    }
    with _watched(pack) as (worlds, watch):
        report = run_scenario(parse(data, "<overlapping pauses>"), worlds, seed=1)

    # the shorter pause's end left the node to the longer one: resumed once, at its end
    # (it was resumed at both ends, the first 0.8 s early)
    assert watch.resumed == [NODE]
    assert report.outcomes[NODE].status != "hung", _problems(report)
    assert _effects(report) == {0: {"nodes paused": 1}, 1: {"nodes paused": 1}}
