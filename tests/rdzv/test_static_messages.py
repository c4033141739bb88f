"""What the figures and words of rendezvous messages claim: time counted from where the
deadline started, never below the timeout that passed; a join bounded by its deadline; a
connection that ends after the deadline not blamed on a crash; rank lists in the right
number; the exit barrier saying what it waits for; a node that arrives after node 0 left."""

from __future__ import annotations

import json
import logging
import re
import socket
from typing import Any

import pytest
from round_config import round_cfg

from rdzv.errors import (
    RendezvousConnectionError,
    RendezvousTimeoutError,
    StoreClosedError,
    StoreTimeoutError,
)
from rdzv.events import EventCollector
from rdzv.rendezvous._deadline import (
    CANCEL_BOUND,
    LATE_READ,
    LATE_WAKE,
    WAIT_FOR_DIAGNOSER,
)
from rdzv.rendezvous._departures import Waited
from rdzv.rendezvous._exit import leave, unconfirmed_message
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_failures import format_waited, timeout_message
from rdzv.rendezvous._round_io import OVERSHOOT
from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.base import HashStore, Store

KEYS = RoundKeys("run")
DONE = KEYS.of(0, "done")
DIAGNOSING = KEYS.of(0, "diagnosing")


def _cfg(rank: int, world_size: int, timeout: float = 3.0, read: float = 3.0) -> StaticConfig:
    return round_cfg(rank, world_size, timeout, read)


def _identity(rank: int, world_size: int) -> Identity:
    return Identity("host", 1000 + rank, rank, world_size, f"token{rank}")


class _Clock:
    """A monotonic clock the test moves (``now``); the handler connected at 0.3 s."""

    def __init__(self) -> None:
        self.now = 0.3

    def __call__(self) -> float:
        return self.now


class _DeadlineStore(HashStore):
    """The wait for the verdict lasts until ``at`` on ``clock``, then fails with ``error``
    (a timeout by default); each CHECK costs ``check_cost`` seconds of ``clock``."""

    def __init__(
        self, clock: _Clock, at: float, error: Exception | None = None, check_cost: float = 0.0
    ) -> None:
        super().__init__()
        self.clock, self.at, self.error, self.check_cost = clock, at, error, check_cost

    def get(self, key: str) -> bytes:
        if key == DONE and not super().check([key]):
            self.clock.now = self.at
            raise self.error or StoreTimeoutError(f"wait timeout, keys: /{key}")
        return super().get(key)

    def check(self, keys: Any) -> bool:
        self.clock.now += self.check_cost
        return super().check(keys)


def _protocol(
    store: Store, clock: _Clock, rank: int = 1, world_size: int = 2, timeout: float = 3.0
) -> RoundProtocol:
    """Round 0 as the handler runs it: the deadline started at 0.0, before connecting."""
    return RoundProtocol(
        store,
        _cfg(rank, world_size, timeout),
        _identity(rank, world_size),
        0,
        timeout,
        clock,
        wall=lambda: 1.0,
        reconnect=_no_reconnect,
        started=0.0,
    )


def _no_reconnect(seconds: float) -> Store:
    raise AssertionError("a node past its deadline must not publish a lost connection")


# -- the figures --------------------------------------------------------------------------------


def test_a_timeout_counts_from_where_the_deadline_started_not_from_the_connection() -> None:
    clock = _Clock()
    store = _DeadlineStore(clock, at=3.12)  # 3.12 s since the deadline started, 2.82 since
    with pytest.raises(  # this node connected
        RendezvousTimeoutError, match=r"timed out after 3\.1 s: 1 of 2 nodes joined; missing"
    ):
        _protocol(store, clock).join()


@pytest.mark.parametrize(
    ("waited", "timeout", "shown"),
    [(8.01, 8.0, "8.0"), (7.96, 8.0, "8.0"), (3.12, 3.0, "3.1"), (2.94, 2.94, "3.0")],
)
def test_a_timeout_figure_is_never_shown_below_the_timeout_that_passed(
    waited: float, timeout: float, shown: str
) -> None:
    assert format_waited(waited, at_least=timeout) == shown
    message = timeout_message(_cfg(0, 2, timeout), "round 0", waited, [0], [])
    assert message.startswith(f"rendezvous round 0 timed out after {shown} s: 1 of 2")


def test_a_node_reading_anothers_verdict_counts_its_wait_from_its_own_deadline_start() -> None:
    clock = _Clock()
    store = HashStore()
    verdict = {"status": "aborted", "reason": "timeout", "message": "rendezvous ... timed out"}
    store.set(DONE, json.dumps({**verdict, "by": _identity(0, 2).as_dict(), "at": 1.0}))
    with pytest.raises(RendezvousTimeoutError, match=r"this node, rank 1 .*, waited 0\.3 s\]$"):
        _protocol(store, clock).join()


# -- the deadline bounds the whole join ----------------------------------------------------------


def test_a_connection_the_store_host_closes_after_the_deadline_is_a_timeout_not_a_crash() -> None:
    clock = _Clock()
    eof = StoreClosedError("the store at 127.0.0.1:29400 closed the connection (EOF) during GET")
    eof.seen = "eof"  # type: ignore[attr-defined]
    store = _DeadlineStore(clock, at=3.4, error=eof)

    with pytest.raises(RendezvousTimeoutError) as caught:
        _protocol(store, clock).join()
    assert caught.match(
        r"^rendezvous round 0 of run 'run' at 127\.0\.0\.1:29400 timed out after 3\.4 s: the"
        r" store host closed the connection after this node's join deadline had passed \(it"
        r" gave up on the round too\), so which ranks are missing could not be determined"
    )
    assert "crash" not in str(caught.value)


def test_a_connection_reset_after_the_deadline_says_reset_and_nothing_more() -> None:
    clock = _Clock()
    reset = StoreClosedError("connection reset by peer at 127.0.0.1:29400 during GET")
    reset.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    store = _DeadlineStore(clock, at=3.2, error=reset)

    with pytest.raises(
        RendezvousTimeoutError,
        match=r"timed out after 3\.2 s: the connection to the store was reset after this node's",
    ):
        _protocol(store, clock).join()


def test_invariant_9_naming_the_missing_ranks_stops_when_the_overshoot_is_spent() -> None:
    clock = _Clock()
    store = _DeadlineStore(clock, at=3.0, check_cost=0.2)  # a busy store: 0.2 s per CHECK

    with pytest.raises(RendezvousTimeoutError) as caught:
        _protocol(store, clock, world_size=64).join()  # 63 CHECKs would take 12.6 s
    waited = format_waited(clock.now, 3.0)
    assert caught.match(
        rf"timed out after {re.escape(waited)} s: which ranks are missing could not be"
        r" determined \(no time was left to ask the store\)\. Start the missing nodes"
    )
    assert clock.now <= 3.0 + OVERSHOOT  # the join outlived its deadline by the overshoot at most
    verdict = json.loads(store.get(DONE))
    assert verdict["reason"] == "timeout"  # still published, within the overshoot


class _CountingDeadlineStore(_DeadlineStore):
    """Counts the requests made once the deadline passed (each CHECK costs 1 ms)."""

    def __init__(self, clock: _Clock, at: float) -> None:
        super().__init__(clock, at, check_cost=0.001)
        self.after = 0

    def check(self, keys: Any) -> bool:
        self.after += self.clock.now >= self.at
        return super().check(keys)

    def get(self, key: str) -> bytes:
        self.after += self.clock.now >= self.at
        return super().get(key)


def test_naming_the_missing_ranks_of_4096_takes_a_few_requests_not_one_per_rank() -> None:
    clock = _Clock()
    store = _CountingDeadlineStore(clock, at=3.0)
    world = 4096
    missing = {7, 777, 4095}
    for rank in range(world):
        if rank not in missing and rank != 1:
            who = _identity(rank, world)
            store.set(KEYS.claim(0, rank), who.raw)
            store.append(KEYS.of(0, "joined"), f"{rank},")
    store.set(KEYS.claim(0, 777), _identity(777, world).raw)  # claimed, never confirmed

    with pytest.raises(
        RendezvousTimeoutError,
        match=r"4093 of 4096 nodes joined; missing ranks: 7, 777, 4095\. Rank 777 claimed its"
        r" place but never confirmed",
    ):
        _protocol(store, clock, world_size=world).join()
    # the joined list (CHECK + GET), one CHECK per missing rank, the verdict: every node whose
    # deadline passes asks this much, where asking for every rank's keys took 8192 CHECKs
    assert store.after <= 10


class _ElectionLost(_CountingDeadlineStore):
    """Another member won the election of the round's diagnoser before this node's deadline
    passed; while this node waits for it, its verdict (``verdict``) arrives, or, with None,
    nothing does until ``WAIT_FOR_DIAGNOSER`` past the deadline (the diagnoser died)."""

    def __init__(self, clock: _Clock, at: float, verdict: str | None) -> None:
        super().__init__(clock, at)
        self.verdict = verdict
        self.waits = 0
        HashStore.add(self, DIAGNOSING, 1)

    def get(self, key: str) -> bytes:
        if key == DONE and not HashStore.check(self, [DONE]):
            self.waits += 1
            if self.waits == 2:  # the wait for the diagnoser, after the join's own wait
                if self.verdict is None:
                    self.clock.now = self.at + WAIT_FOR_DIAGNOSER
                    raise StoreTimeoutError(f"wait timeout, keys: /{key}")
                HashStore.set(self, DONE, self.verdict)
        return super().get(key)


def test_a_member_that_lost_the_election_reports_the_diagnosers_verdict_in_one_wait() -> None:
    clock = _Clock()
    diagnosis = {"status": "aborted", "reason": "timeout", "message": "... missing ranks: 7."}
    verdict = json.dumps({**diagnosis, "by": _identity(5, 4096).as_dict(), "at": 1.0})
    store = _ElectionLost(clock, 3.0, verdict)
    with pytest.raises(RendezvousTimeoutError, match=r"missing ranks: 7\. \[reported by rank 5"):
        _protocol(store, clock, world_size=4096).join()
    # the election's ADD is not counted here; the one wait for the diagnoser's verdict is:
    # no CHECK of the joined list or of any claim
    assert store.after == 1
    assert int(HashStore.get(store, DIAGNOSING)) == 2


def test_a_member_names_the_missing_ranks_itself_when_the_diagnoser_stays_silent(
    events: EventCollector,
) -> None:
    clock = _Clock()
    store = _ElectionLost(clock, 3.0, None)
    with pytest.raises(
        RendezvousTimeoutError, match=r"1 of 2 nodes joined; missing ranks: 0\. Start the"
    ):
        _protocol(store, clock).join()
    assert json.loads(HashStore.get(store, DONE))["by"]["rank"] == 1  # its own verdict
    assert clock.now <= 3.0 + OVERSHOOT
    assert [e["event"] for e in events.events if e["event"] == "diagnoser_silent"] == [
        "diagnoser_silent"
    ]


class _VerdictInTheWait(HashStore):
    """Records the timeout of the wait on ``done``; the verdict arrives during that wait."""

    def __init__(self, verdict: str, count: int) -> None:
        super().__init__()
        self.verdict = verdict
        self.waited: list[float] = []
        HashStore.add(self, KEYS.of(0, "count"), count)  # this many joined before this node

    def get(self, key: str) -> bytes:
        if key == DONE and not HashStore.check(self, [DONE]):
            self.waited.append(self.timeout.total_seconds())
            HashStore.set(self, DONE, self.verdict)
        return super().get(key)


@pytest.mark.parametrize(("before", "past_deadline"), [(0, 0.0), (7, 0.0), (8, LATE_WAKE)])
def test_only_the_first_members_to_join_wake_at_their_deadline_the_others_wait_on(
    before: int, past_deadline: float
) -> None:
    clock = _Clock()  # 0.3 s: this node's deadline, at 3.0, is 2.7 s away
    diagnosis = {"status": "aborted", "reason": "timeout", "message": "... missing ranks: 9."}
    store = _VerdictInTheWait(
        json.dumps({**diagnosis, "by": _identity(5, 10).as_dict(), "at": 1.0}), before
    )
    with pytest.raises(RendezvousTimeoutError, match=r"missing ranks: 9\. \[reported by rank 5"):
        _protocol(store, clock, world_size=10).join()
    assert store.waited == [pytest.approx(2.7 + past_deadline)]  # one wait, no CHECK, no ADD
    assert not HashStore.check(store, [DIAGNOSING])


class _SilentAfterTheDeadline(_DeadlineStore):
    def check(self, keys: Any) -> bool:
        raise StoreTimeoutError("no reply to CHECK within 300ms; the connection was closed")


def test_missing_ranks_the_store_cannot_tell_in_time_are_reported_as_not_determined() -> None:
    clock = _Clock()
    with pytest.raises(
        RendezvousTimeoutError,
        match=r"which ranks are missing could not be determined \(the store did not answer in",
    ):
        _protocol(_SilentAfterTheDeadline(clock, at=3.0), clock).join()


# -- rank lists ----------------------------------------------------------------------------------


class _WaitingMovesTheClock(HashStore):
    """A wait that times out moves ``clock`` on by its timeout (no real time passes)."""

    def __init__(self, clock: _Clock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, keys: Any, timeout: Any = None) -> None:
        try:
            super().wait(keys, 0.0)
        except StoreTimeoutError:
            self.clock.now += float(timeout)
            raise


def test_the_ranks_that_did_not_read_the_result_are_named_gone_or_silent() -> None:
    where = "round 0 of run 'run' at h:1"
    assert unconfirmed_message(where, Waited([1], [2], [], None, 0.1), 900.0, 10.0) == (
        "round 0 of run 'run' at h:1 completed, but rank 2 left without confirming it read the"
        " result (its connection to the store closed, or its process ended); this node keeps"
        " the world it got."
    )
    both = unconfirmed_message(where, Waited([], [2, 3], [5], "quiet", 10.0), 900.0, 10.0)
    assert "but ranks 2-3 left without confirming" in both
    assert ", and rank 5 did not confirm reading it: nothing was heard from it for 10 s;" in both
    late = unconfirmed_message(where, Waited([], [], [5, 6], "limit", 3.0), 3.0, 3.0)
    assert "but ranks 5-6 did not confirm reading it: not within 3 s (read_timeout);" in late


def test_the_hosting_node_reports_the_rank_that_never_read_the_result_and_keeps_the_world(
    events: EventCollector,
) -> None:
    clock = _Clock()
    store = _WaitingMovesTheClock(clock)
    for rank in (0, 1):
        store.set(KEYS.of(0, f"ack/{rank}"), "1")
    protocol = _protocol(store, clock, rank=0, world_size=3)
    protocol.wait_for_readers(900.0)  # returns: the round completed, the world stands

    [ended] = [e for e in events.events if e["event"] == "read_wait_ended"]
    assert (ended["gone"], ended["missing"]) == ([], [2])
    assert ended["message"].endswith(
        "but rank 2 did not confirm reading it: nothing was heard from it for 10 s; this node"
        " keeps the world it got."
    )
    assert clock.now == pytest.approx(10.3)  # the quiet window, not the 900 s read_timeout


# -- the shutdown() exit barrier -----------------------------------------------------------------


def test_the_hosting_node_says_which_ranks_it_waits_for_at_shutdown_and_which_never_came() -> None:
    store = HashStore()
    reports: list[tuple[str, int, dict[str, Any]]] = []

    def report(name: str, level: int, **fields: Any) -> None:
        reports.append((name, level, fields))

    assert leave(store, _cfg(1, 3, read=0.05), KEYS, 0, report) is None  # rank 1 leaves
    assert leave(store, _cfg(0, 3, read=0.05), KEYS, 0, report) == 1  # rank 2 never does

    assert [(name, level) for name, level, _ in reports] == [
        ("exit_wait", logging.INFO),
        ("exit_wait_ended", logging.WARNING),
    ]
    waiting, ended = reports[0][2], reports[1][2]
    assert (waiting["waiting_for"], ended["gone"], ended["missing"]) == ([1, 2], [], [2])
    assert waiting["message"] == (
        "waiting for ranks 1-2 to call shutdown() before stopping the rendezvous store (not for"
        " a node whose connection closes; up to 0.05 s while none does, 0.05 s (read_timeout)"
        " at most)"
    )
    assert ended["message"] == (
        "rank 2 did not call shutdown(): not within 0.05 s (read_timeout); stopping the"
        " rendezvous store anyway"
    )


# -- a node that arrives after node 0 has exited -------------------------------------------------


def test_a_node_arriving_after_node_0_exited_fails_at_its_deadline_naming_the_endpoint() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    host = StaticTCPRendezvous("127.0.0.1", port, 0, 2, "run", 0.5, listen_fd=sock.detach())
    try:
        with pytest.raises(RendezvousTimeoutError, match=r"missing ranks: 1\."):
            host.next_rendezvous()
    finally:
        host.shutdown()  # node 0 exits: its store goes with it

    late = StaticTCPRendezvous("127.0.0.1", port, 1, 2, "run", 1)
    with pytest.raises(
        RendezvousConnectionError,
        match=rf"^rank 1 \(join timeout 1 s\): no rendezvous store answered at 127\.0\.0\.1:{port}:"
        r" gave up after \d+ connection attempts? .*refused.* Nothing listens there",
    ):
        late.next_rendezvous()


def test_a_host_naming_the_missing_ranks_for_a_member_says_whose_deadline_passed() -> None:
    message = timeout_message(_cfg(0, 3, 60.0), "round 0", 1.23, [0, 1], [], for_rank=1)
    assert message == (
        "rendezvous round 0 timed out when the join deadline of rank 1 passed (after 1.2 s"
        " here): 2 of 3 nodes joined; missing ranks: 2. Start the missing nodes, check their"
        " logs, or raise the join timeout."
    )


class _LateAndLost(_DeadlineStore):
    """A member that joined after the watchmen: its wait ends ``LATE_WAKE`` past its deadline
    with no verdict; ``elected`` members before it already added to ``diagnosing``; no
    verdict ever comes (the elected one died). Records every wait's timeout."""

    def __init__(self, clock: _Clock, elected: int) -> None:
        super().__init__(clock, at=3.0 + LATE_WAKE)
        self.waits: list[float] = []
        HashStore.add(self, KEYS.of(0, "count"), 8)  # the watchmen joined first
        if elected:
            HashStore.add(self, DIAGNOSING, elected)

    def get(self, key: str) -> bytes:
        if key == DONE and not HashStore.check(self, [DONE]):
            self.waits.append(self.clock.now + self.timeout.total_seconds())
        return super().get(key)


def test_a_late_member_that_lost_the_election_reads_then_writes_not_determined_itself() -> None:
    clock = _Clock()
    store = _LateAndLost(clock, elected=1)
    with pytest.raises(
        RendezvousTimeoutError,
        match=r"could not be determined \(the member elected to name them published nothing"
        r" in time; no verdict could be read within 2 s after that\)",
    ):
        _protocol(store, clock, world_size=10).join()
    # its wait, LATE_WAKE past the deadline (as late as a cancelled wait ends in time), then
    # one read of the verdict, its cancel included within LATE_READ of finding none
    assert store.waits == [
        pytest.approx(3.0 + LATE_WAKE),
        pytest.approx(3.0 + LATE_WAKE + LATE_READ - CANCEL_BOUND),
    ]
    assert 3.0 + LATE_WAKE + CANCEL_BOUND <= 3.0 + OVERSHOOT
    # it diagnosed nothing, and wrote that as the round's verdict: no node can complete
    # the round later without it
    verdict = json.loads(HashStore.get(store, DONE))
    assert (verdict["status"], verdict["by"]["rank"]) == ("aborted", 1)
    assert "could not be determined" in verdict["message"]


def test_a_late_member_elected_because_no_watchman_got_there_names_the_missing_ranks() -> None:
    clock = _Clock()
    store = _LateAndLost(clock, elected=0)
    with pytest.raises(
        RendezvousTimeoutError, match=r"1 of 10 nodes joined; missing ranks: 0, 2-9"
    ):
        _protocol(store, clock, world_size=10).join()
    assert json.loads(HashStore.get(store, DONE))["by"]["rank"] == 1
