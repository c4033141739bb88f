"""What a node says (harness.world.messages): typed, picklable, read by name."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
from multiprocess.reduction import ForkingPickler

from harness.errors import HarnessError
from harness.run.model import Report
from harness.run.runner import run_scenario
from harness.run.suite import embedded_proxy
from harness.run.worlds import worlds_for
from harness.scenario.load import parse
from harness.world.base import OnMessage
from harness.world.messages import (
    NODE,
    Event,
    Exit,
    Message,
    Outcome,
    Ready,
    Started,
    ends,
    shifted,
)

EVERY_KIND: list[Message] = [
    Ready(1, 10.0, pid=7, tid=8),
    Started(1, 10.5, pid=7, placement="process"),
    Event(1, 10.6, "joined", {"rank": 1, "joined": 2}),
    Outcome(
        1,
        12.0,
        "ok",
        started=10.5,
        pid=7,
        placement="process",
        rank=1,
        world_size=2,
        run_id="run",
        shared_store_ok=True,
        seen_ranks=[0, 1],
        shutdown_error="RuntimeError: refused",
        maxrss_kib=1024,
    ),
    Exit(1, 13.0, "the node process exited with code 3", exitcode=3),
    Event(2, 1.0, "workers started", part="agent"),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda m: type(m).__name__)
def test_every_message_comes_back_whole_through_pickle_and_dill(message: Message) -> None:
    assert pickle.loads(pickle.dumps(message, pickle.HIGHEST_PROTOCOL)) == message
    # what a multiprocess connection's send() uses (dill), for what pickle cannot take
    assert ForkingPickler.loads(bytes(ForkingPickler.dumps(message))) == message


def test_a_message_is_a_whole_node_unless_it_names_a_part() -> None:
    assert {m.part for m in EVERY_KIND[:-1]} == {NODE}
    assert EVERY_KIND[-1].part == "agent"


def test_shifting_a_message_moves_every_time_it_carries() -> None:
    outcome = EVERY_KIND[3]
    moved = shifted(outcome, -10.0)
    assert isinstance(moved, Outcome)
    assert (moved.t, moved.started, moved.elapsed) == (2.0, 0.5, 1.5)
    assert moved.shutdown_error == "RuntimeError: refused"
    assert shifted(EVERY_KIND[0], 1.0) == Ready(1, 11.0, pid=7, tid=8)
    never_began = Outcome(1, 5.0, "error")
    assert shifted(never_began, 1.0) == Outcome(1, 6.0, "error")


def test_only_the_whole_nodes_outcome_or_exit_ends_its_start() -> None:
    assert [ends(m) for m in EVERY_KIND] == [False, False, False, True, True, False]
    assert not ends(Outcome(1, 2.0, "ok", part="worker 0"))


class _WithParts:
    """The local world, whose node 1 also says ``extra`` of one of its parts once started."""

    def __init__(self, worlds: Any, extra: Callable[[float], Message]) -> None:
        self.worlds, self.extra = worlds, extra
        self.name, self.capabilities = worlds.name, worlds.capabilities

    def __call__(self, layout: Any, on_message: OnMessage) -> Any:
        def deliver(message: Message) -> None:
            on_message(message)
            if isinstance(message, Started) and message.node == 1:
                on_message(self.extra(message.t))

        return self.worlds(layout, deliver)


def _two_nodes(extra: Callable[[float], Message]) -> Report:
    data = {"name": "parts", "description": "d", "nodes": 2, "timeouts": {"join": 30}}
    scenario = parse(data, "<parts>")
    with embedded_proxy() as client:
        return run_scenario(scenario, _WithParts(worlds_for(scenario, client), extra), 7)


def test_a_parts_events_are_kept_with_the_part_that_said_them() -> None:
    report = _two_nodes(lambda t: Event(1, t, "workers started", {"workers": 2}, part="agent"))

    assert report.passed, [v.message for v in report.violations]
    (said,) = [e for e in report.outcomes[1].events if e.event == "workers started"]
    assert (said.part, said.fields) == ("agent", {"workers": 2})
    assert {e.part for e in report.outcomes[1].events if e is not said} == {NODE}


def test_an_outcome_of_a_part_is_kept_beside_the_nodes_and_a_parts_ready_is_refused() -> None:
    report = _two_nodes(lambda t: Outcome(1, t, "error", part="worker 0", exitcode=3))
    (part,) = report.outcomes[1].parts
    assert (part.node, part.part, part.status, part.exitcode) == (1, "worker 0", "error", 3)
    assert report.outcomes[1].status == "ok"  # the node's own outcome is the node's
    with pytest.raises(HarnessError, match=r"node 1's part 'worker 0' sent its Ready"):
        _two_nodes(lambda t: Ready(1, t, pid=1, tid=2, part="worker 0"))
