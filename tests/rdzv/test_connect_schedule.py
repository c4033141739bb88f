"""The connect's retry schedule: each attempt waits for an answer a bounded time, so a path
that heals is used within about a second whenever it heals, at about one SYN a second.

Read as numbers (the pure schedule, with a model of the kernel's SYN retransmissions inside
one attempt) and through ``connect()`` on a clock of the test's own: no test here waits."""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Iterator

import pytest

from rdzv.errors import StoreConnectionError
from rdzv.store.client import _causes, _connect
from rdzv.store.client._retry import ATTEMPT_CAP, NO_ANSWER_PAUSE, Schedule
from rdzv.store.wire import _wire

#: When the kernel sends a connect's SYNs, in seconds from its start: classic exponential
#: retransmission, and linear timeouts for the first retries (as on this project's kernels).
KERNELS = {
    "exponential": (0.0, 1.0, 3.0, 7.0, 15.0, 31.0),
    "linear": (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 11.0, 19.0),
}


def _syns_into_a_black_hole(seed: int, kernel: str, until: float) -> Iterator[float]:
    """The times a connect sends SYNs while nothing answers, by the schedule alone."""
    schedule = Schedule(random.Random(seed))
    now = 0.0
    while now < until:
        bound = schedule.attempt_bound()
        yield from (now + at for at in KERNELS[kernel] if at < bound)
        now += bound
        now += schedule.pause(_causes._NoAnswer("no answer"), now)


def test_the_first_attempt_waits_about_a_second_and_none_waits_longer_than_the_cap() -> None:
    schedule = Schedule(random.Random(7))
    bounds = []
    for _ in range(50):
        bounds.append(schedule.attempt_bound())
        assert schedule.pause(_causes._NoAnswer("no answer"), 0.0) <= NO_ANSWER_PAUSE
    assert 0.75 <= bounds[0] <= 1.0
    assert all(1.5 <= bound <= ATTEMPT_CAP for bound in bounds[1:])
    assert len({round(bound, 6) for bound in bounds}) > 40  # jittered: no waves


def test_refusals_do_not_lengthen_the_wait_for_an_answer() -> None:
    schedule = Schedule(random.Random(7))
    for _ in range(20):
        schedule.pause(ConnectionRefusedError(111, "refused"), 5.0)
    assert schedule.attempt_bound() <= 1.0


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("seed", range(10))
def test_a_path_that_heals_gets_a_syn_within_about_a_second_whenever_it_heals(
    kernel: str, seed: int
) -> None:
    syns = list(_syns_into_a_black_hole(seed, kernel, 70.0))
    for tenth in range(600):
        heals = tenth / 10
        first_after = min(at for at in syns if at >= heals)
        assert first_after - heals <= 1.0 + NO_ANSWER_PAUSE, (heals, syns)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_a_black_hole_gets_about_one_syn_a_second_from_a_node_never_more(kernel: str) -> None:
    for seed in range(20):
        syns = [at for at in _syns_into_a_black_hole(seed, kernel, 60.0) if at < 60.0]
        assert 45 <= len(syns) <= 75, syns


class _Clock:
    """The connect's ``time``: ``sleep`` moves it on, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


_HANDSHAKE_REPLY = (os.getpid() & 0xFFFFFFFF).to_bytes(4, "little") + bytes([_wire.READY])


def _black_hole_until(
    monkeypatch: pytest.MonkeyPatch, heals: float
) -> tuple[_Clock, list[float], list[socket.socket]]:
    """A dial that gets no answer until ``heals`` seconds on the test's clock; then connects
    (and the handshake passes). Returns the clock, the attempts' bounds, the sockets made."""
    clock, bounds, ends = _Clock(), [], []
    start = clock.now

    def dial(host: str, port: int, deadline: float | None, bound: float) -> socket.socket:
        bounds.append(bound)
        waits = bound if deadline is None else min(bound, deadline - clock.now)
        if clock.now - start < heals:
            clock.now += waits
            raise _causes._NoAnswer(f"no answer to the connection attempt within {waits:.2f} s")
        ends.extend(socket.socketpair())
        ends[-1].sendall(_HANDSHAKE_REPLY)  # a store: the PING's nonce, then READY
        return ends[-2]

    monkeypatch.setattr(_connect, "time", clock)
    monkeypatch.setattr(_connect, "_dial", dial)
    return clock, bounds, ends


def test_a_path_that_heals_at_two_thirds_of_the_timeout_is_used_within_about_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, bounds, ends = _black_hole_until(monkeypatch, 12.0)
    try:
        connected = _connect.connect("198.18.0.10", 29500, 18.0, random.Random(3), _wire.Limits())
        connected.channel.close()
    finally:
        for end in ends:
            end.close()
    assert 12.0 <= connected.elapsed <= 12.0 + ATTEMPT_CAP + NO_ANSWER_PAUSE
    assert connected.attempts == len(bounds) >= 7
    assert max(bounds) <= ATTEMPT_CAP


def test_a_connect_into_a_black_hole_counts_its_attempts_and_names_the_last_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, bounds, _ = _black_hole_until(monkeypatch, float("inf"))
    with pytest.raises(StoreConnectionError) as info:
        _connect.connect("198.18.0.10", 29500, 18.0, random.Random(3), _wire.Limits())
    assert info.value.connect_cause == "no answer"
    assert str(info.value).startswith(
        f"no rendezvous store answered at 198.18.0.10:29500: gave up after {len(bounds)} "
        "connection attempts in 18.00 s (timeout 18 s); last cause: no answer to the connection "
        "attempt within "
    )
    assert len(bounds) >= 9


def test_the_backoff_jitter_is_seeded_only_at_its_first_draw_and_as_the_seed_says() -> None:
    import random

    from rdzv.store.client._connect import LazyRandom

    lazy = LazyRandom(7)
    assert lazy._random is None  # a connect that succeeds at once draws nothing
    expected = random.Random(7)
    assert [lazy.uniform(0, 1) for _ in range(3)] == [expected.uniform(0, 1) for _ in range(3)]
