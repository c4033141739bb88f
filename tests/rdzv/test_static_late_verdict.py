"""A member whose wait for the round's verdict ends late -- its process not run when the
wait was due to end, or its store slow to answer -- still reads the verdict that exists
(invariant 9 of :mod:`rdzv.rendezvous._join`, case 4 of :mod:`rdzv.rendezvous._deadline`);
and the hosting node has its overshoot, not what is left of its own deadline, to publish a
member's timeout.

A real store server in a subprocess (frozen with SIGSTOP where the store must be slow) and
real client connections; one member per test, in a thread. The late wake is made exact with
an injected clock that jumps when the member first reads it after its wait: nothing here
asserts how long anything took.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import threading
import time
from functools import partial
from typing import Any

import pytest
from round_config import round_cfg

from conftest import ServerProcess
from rdzv.errors import RendezvousTimeoutError
from rdzv.events import EVENT_ATTR, EventCollector
from rdzv.rendezvous._connection import reconnect
from rdzv.rendezvous._deadline import verdict_grace, watches
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_io import OVERSHOOT
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore

KEYS = RoundKeys("run")
DONE = KEYS.of(0, "done")
TIMEOUT = 1.0  # the member's join timeout
BOUND = 60.0  # how long the test waits for the member's thread, at most


def _join(member: RoundProtocol) -> BaseException | None:
    """Run ``member``'s join in a thread; what it raised."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            member.join()
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), "the member's join did not end"
    return caught[0] if caught else None


def _late_reads(events: EventCollector) -> list[dict[str, Any]]:
    return [e for e in events.events if e["event"] == "verdict_read_late"]


_WORLD = 16  # more than the watchmen: a member may join after them
_NAMED = r"15 of 16 nodes joined; missing ranks: 15\. \[reported by rank 0"


def _verdict() -> bytes:
    """The host's verdict (rank 15 never came)."""
    message = "rendezvous ... timed out: 15 of 16 nodes joined; missing ranks: 15."
    by = Identity("host", 1000, 0, _WORLD, "token0").as_dict()
    verdict = {"status": "aborted", "reason": "timeout", "message": message, "by": by, "at": 1.0}
    return json.dumps(verdict).encode()


class _AfterTheWait:
    """``time.monotonic``, and once it reaches ``at``: ``then()`` is called (once) and, with
    ``jump``, the clock reads that much later from then on (this process was not scheduled
    for that long: it finds its time gone when it wakes)."""

    def __init__(self, then: Any, jump: float = 0.0) -> None:
        self.at = float("inf")
        self.then, self.jump, self.fired = then, jump, False

    def __call__(self) -> float:
        now = time.monotonic()
        if now >= self.at and not self.fired:
            self.fired = True
            self.then()
        return now + self.jump if self.fired else now


def _late_member(port: int, clock: _AfterTheWait, watchmen_before: int) -> RoundProtocol:
    """Rank 1 of 16, joining after ``watchmen_before`` others."""
    store = TCPStore("127.0.0.1", port, timeout=30)
    if watchmen_before:
        store.add(KEYS.of(0, "count"), watchmen_before)
    start = time.monotonic()
    member = RoundProtocol(
        store,
        round_cfg(1, _WORLD, TIMEOUT),
        Identity("host", 1001, 1, _WORLD, "token1"),
        0,
        start + TIMEOUT,
        clock,
        time.time,
        reconnect=partial(reconnect, store),
        started=start,
    )
    # its wait for the verdict ends then (or later: the cancel), and it reads no clock meanwhile
    clock.at = start + TIMEOUT + verdict_grace(watches(watchmen_before + 1))
    return member


def test_invariant_9_a_member_that_wakes_past_the_overshoot_reads_the_verdict_published(
    server_process: ServerProcess, events: EventCollector
) -> None:
    # Its wait ends with no verdict; before it looks again the host publishes one and the
    # member's clock jumps past the overshoot (its process was not run meanwhile).
    writer = TCPStore("127.0.0.1", server_process.port, timeout=30)
    clock = _AfterTheWait(lambda: writer.set(DONE, _verdict()), jump=OVERSHOOT + 0.5)
    member = _late_member(server_process.port, clock, watchmen_before=8)
    try:
        error = _join(member)
        assert clock.fired  # the verdict came only after its wait
        assert isinstance(error, RendezvousTimeoutError)
        assert re.search(_NAMED, str(error)), error
        (read,) = _late_reads(events)
        assert read["found"]  # on its own connection, or (a cancel answered too late) a fresh one
    finally:
        member.store.close()  # type: ignore[attr-defined]
        writer.close()


def test_invariant_9_a_member_that_finds_no_verdict_late_writes_its_own_so_none_completes(
    server_process: ServerProcess, events: EventCollector
) -> None:
    # Nobody publishes: its wait ends with no verdict and its clock jumps past the
    # overshoot. It gives up ("could not be determined") -- and proposes that as the round's
    # verdict, so a node not run meanwhile cannot complete the round later without it (the
    # round simulation's finding: test_no_round_completes_after_a_member_gave_up...).
    clock = _AfterTheWait(lambda: None, jump=OVERSHOOT + 0.5)
    member = _late_member(server_process.port, clock, watchmen_before=8)
    writer = TCPStore("127.0.0.1", server_process.port, timeout=30)
    try:
        error = _join(member)
        assert clock.fired
        assert isinstance(error, RendezvousTimeoutError)
        assert "could not be determined" in str(error), error
        (read,) = _late_reads(events)
        assert (read["found"], read["proposed"]) == (False, True)
        late_complete = json.dumps({"status": "complete"}).encode()
        verdict = json.loads(writer.compare_set(DONE, "", late_complete))
        assert (verdict["status"], verdict["reason"]) == ("aborted", "timeout")
        assert verdict["by"]["rank"] == 1
    finally:
        member.store.close()  # type: ignore[attr-defined]
        writer.close()


@pytest.mark.parametrize("watchmen_before", [8, 0], ids=["late member", "watchman"])
def test_a_member_whose_store_froze_past_its_wait_reads_the_verdict_over_a_fresh_connection(
    server_process: ServerProcess, events: EventCollector, watchmen_before: int
) -> None:
    # The store stops (SIGSTOP) once the member joined, with the host's verdict unread in its
    # socket: the member's wait ends, its cancel gets no answer, the client closes the
    # connection -- with no time left in the overshoot. The store runs again right then.
    writer = TCPStore("127.0.0.1", server_process.port, timeout=30)
    resume = partial(os.kill, server_process.pid, signal.SIGCONT)
    clock = _AfterTheWait(resume)

    def freeze() -> None:
        os.kill(server_process.pid, signal.SIGSTOP)
        _, status = os.waitpid(server_process.pid, os.WUNTRACED)  # returns once it stopped
        assert os.WIFSTOPPED(status)
        writer.set(DONE, _verdict())  # a request without a reply: queued in the socket

    hook = _OnEvent("joined", freeze)
    logging.getLogger("rdzv.rendezvous").addHandler(hook)
    member = _late_member(server_process.port, clock, watchmen_before)
    try:
        error = _join(member)
        assert hook.fired and clock.fired
        assert isinstance(error, RendezvousTimeoutError)
        assert re.search(_NAMED, str(error)), error
        (read,) = _late_reads(events)
        assert (read["fresh"], read["found"]) == (True, True)
        assert member.connection_lost  # the node dials again for its next round
        assert writer.get(KEYS.of(0, "ack/1")) == b"1"  # acknowledged over the fresh one
    finally:
        resume()
        logging.getLogger("rdzv.rendezvous").removeHandler(hook)
        member.store.close()  # type: ignore[attr-defined]
        writer.close()


class _OnEvent(logging.Handler):
    """Calls ``then()`` on the thread that emits rdzv event ``name`` (the first time)."""

    def __init__(self, name: str, then: Any) -> None:
        super().__init__()
        self.name_, self.then, self.fired = name, then, False

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, EVENT_ATTR, {})
        if event.get("event") == self.name_ and not self.fired:
            self.fired = True
            self.then()


class _MemberDeadlineAt:
    """The hosting node's member watch: a member's deadline passed, rank 2 is missing."""

    def decide(self, *args: Any) -> str:
        return "member_deadline"

    def members(self, round_index: int) -> tuple[list[int], list[int], int]:
        return [0, 1], [], 1


class _BoundedPublish(HashStore):
    """Records the timeout the verdict's compare_set was given."""

    published_within: float | None = None

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        if key == DONE:
            self.published_within = self.timeout.total_seconds()
        return super().compare_set(key, expected, desired)


def test_a_host_whose_own_deadline_is_due_still_has_its_overshoot_to_publish_for_a_member() -> None:
    store = _BoundedPublish()
    host = RoundProtocol(
        store,
        round_cfg(0, 3, 3.0),
        Identity("host", 1000, 0, 3, "token0"),
        0,
        3.0,
        lambda: 2.99,  # a member's deadline passed; the host's own, at 3.0, is 10 ms away
        wall=lambda: 1.0,
        started=0.0,
        arbiter=_MemberDeadlineAt(),  # type: ignore[arg-type]
    )
    with pytest.raises(RendezvousTimeoutError, match=r"join deadline of rank 1 passed"):
        host.join()
    # bounded by its hard end (its deadline plus the overshoot), not by its own deadline:
    # 10 ms left of that lost the verdict to a busy machine (no reply in time, connection closed)
    assert store.published_within == pytest.approx(3.0 + OVERSHOOT - 2.99)
