"""What makes a rendezvous at scale fast, and that it changes no behaviour.

* ``add_then_set``: the join's ADD and its confirmation SET in one write;
* ``compare_sets``: the join's two COMPARE_SETs (``first``, the claim) in one write, so a
  member's first round makes three round trips after connecting;
* the connect retry pause: short after a refusal early on, exponential otherwise;
* the server's one read buffer, shared by every connection.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from round_config import round_cfg
from scripted_peer import ScriptedPeer

from conftest import InThread
from rdzv.rendezvous._join import RoundProtocol
from rdzv.rendezvous._round_state import Identity
from rdzv.store.client import TCPStore
from rdzv.store.client._retry import FAST_RETRY, FAST_WINDOW, Backoff, retry_pause
from rdzv.store.server import StoreServer
from rdzv.store.wire import _decoder, _wire


@pytest.fixture
def server() -> Iterator[StoreServer]:
    with StoreServer("127.0.0.1", 0) as started:
        yield started


# --- add_then_set ------------------------------------------------------------------------


def test_add_then_set_returns_the_sum_and_leaves_the_set_value_behind(
    server: StoreServer,
) -> None:
    with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
        client.add("count", 2)
        assert client.add_then_set("count", 1, "confirmed/1", b"me") == 3
        assert client.get("confirmed/1") == b"me"
        assert client.add("count", 0) == 3


def test_add_then_set_sends_the_set_before_the_add_is_answered() -> None:
    peer = ScriptedPeer(pipelined=True)
    try:
        with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
            adding = InThread(client.add_then_set, "count", 1, "confirmed/1", b"me")
            peer.expect(_wire.Add)
            peer.expect(_wire.Set)  # arrived while the ADD still waits for its reply
            assert not adding.done.is_set()
            peer.send(_wire.encode_i64(7))
            assert adding.outcome() == 7
    finally:
        peer.close()


def test_add_then_set_fails_like_add_when_the_store_hangs_up() -> None:
    peer = ScriptedPeer(pipelined=True)
    try:
        with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
            peer.hang_up_on(_wire.Add)
            with pytest.raises(ConnectionError, match=r"closed the connection \(EOF\) during ADD"):
                client.add_then_set("count", 1, "confirmed/1", b"me")
    finally:
        peer.close()


# --- compare_sets and a member's writes --------------------------------------------------


def test_compare_sets_answers_each_compare_set_in_order(server: StoreServer) -> None:
    with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
        client.set("taken", b"old")
        items = [("free", "", b"mine"), ("taken", "", b"mine"), ("free", b"mine", b"new")]
        assert client.compare_sets(items) == [b"mine", b"old", b"new"]
        assert client.get("free") == b"new"


def _join(store: TCPStore, rank: int) -> None:
    me = Identity("host", 1000 + rank, rank, 2, f"token{rank}")
    RoundProtocol(
        store, round_cfg(rank), me, 0, time.monotonic() + 10.0, time.monotonic, time.time
    ).join()


def test_a_member_joins_in_two_round_trips_and_three_writes_after_connecting(
    server: StoreServer,
) -> None:
    writes: list[list[str]] = []
    with (
        TCPStore("127.0.0.1", server.port, timeout=10.0) as member,
        TCPStore("127.0.0.1", server.port, timeout=10.0) as completer,
    ):
        channel = member._channel
        send = channel.send

        waits = threading.Event()

        def recorded(data: bytes, op: str, deadline: float | None) -> None:
            writes.append([type(req).__name__ for req in _decoder.RequestDecoder().feed(data)])
            send(data, op, deadline)
            if "Wait" in writes[-1]:
                waits.set()

        channel.send = recorded  # type: ignore[method-assign]
        waiting = InThread(_join, member, 1)
        assert waits.wait(30)  # it joined first: it waits for the verdict, rank 0 completes
        _join(completer, 0)
        waiting.outcome()
    assert writes == [
        ["CompareSet", "CompareSet"],  # first and the claim
        # count, the confirmation, the joined list, arbiter (invariant 11), the verdict
        ["Add", "Set", "Append", "Check", "Wait", "Get"],
        ["Set"],  # the ack, once it read the verdict: no reply
    ]


# --- the connect retry pause -------------------------------------------------------------


def test_a_refusal_early_in_a_connect_is_retried_after_a_short_pause() -> None:
    backoff = Backoff(random.Random(1))
    refused = ConnectionRefusedError(111, "Connection refused")
    pauses = [retry_pause(refused, FAST_WINDOW * i / 20, backoff) for i in range(20)]
    assert all(FAST_RETRY / 2 <= pause <= FAST_RETRY for pause in pauses)
    assert backoff.attempt == 0  # the exponential backoff has not started


def test_a_late_refusal_or_another_failure_backs_off_exponentially() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    late = Backoff(random.Random(1))
    other = Backoff(random.Random(1))
    for attempt in range(8):
        ceiling = min(late.cap, late.initial * 2**attempt)
        assert ceiling / 4 <= retry_pause(refused, FAST_WINDOW, late) <= ceiling
        assert ceiling / 4 <= retry_pause(ConnectionResetError(), 0.0, other) <= ceiling


# --- the server's shared read buffer -----------------------------------------------------


def test_partial_requests_of_two_connections_do_not_mix(server: StoreServer) -> None:
    """Each connection sends half of a SET, then the other half; the halves interleave."""
    sets = [_wire.encode_request(_wire.Set(f"/k{i}".encode(), b"v%d" % i * 50)) for i in (1, 2)]
    conns = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in sets]
    try:
        for conn, data in zip(conns, sets, strict=True):
            conn.sendall(_wire.encode_request(_wire.Validate()) + data[: len(data) // 2])
        with TCPStore("127.0.0.1", server.port, timeout=10.0) as probe:
            assert not probe.check(["k1"]) and not probe.check(["k2"])
            for conn, data in zip(reversed(conns), reversed(sets), strict=True):
                conn.sendall(data[len(data) // 2 :])
            assert probe.get("k1") == b"v1" * 50
            assert probe.get("k2") == b"v2" * 50
    finally:
        for conn in conns:
            conn.close()
