"""The member's join reads and writes the same bytes with less work (issue 25): an identity
encoded without building a ``JSONEncoder``, a complete verdict and the first node's world
size told without parsing, the connect's jitter drawn from the process's generator, and
the count, the arbiter's CHECK and the verdict's read in one write (``add_then_get``).

Each shortcut must give the answer the full path gives, or say "parse it to know".
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import InThread
from rdzv.errors import StoreTimeoutError
from rdzv.rendezvous._round_state import (
    Identity,
    decode_verdict,
    encode_verdict,
    is_complete,
)
from rdzv.store.client import HeldGet, TCPStore
from rdzv.store.client._connect import LazyRandom
from rdzv.store.server import StoreServer

_texts = st.text()  # any code point: quotes, backslashes, controls, lone surrogates
_ints = st.integers(min_value=-(2**70), max_value=2**70)


def _identity(
    host: str, pid: int, rank: int, world_size: int, token: str, machine: str
) -> Identity:
    return Identity(host, pid, rank, world_size, token, machine)


def _json(me: Identity) -> bytes:
    return json.dumps(me.as_dict(), sort_keys=True, separators=(",", ":")).encode()


@given(_texts, _ints, _ints, _ints, _texts, _texts)
def test_an_identity_is_stored_as_the_json_it_always_was(
    host: str, pid: int, rank: int, world_size: int, token: str, machine: str
) -> None:
    me = _identity(host, pid, rank, world_size, token, machine)
    assert me.raw == _json(me)
    assert Identity.decode(me.raw, "claim") == me


@given(st.sampled_from([True, 1.5, None, "7"]))
def test_an_identity_with_fields_of_other_types_is_still_encoded_by_json(odd: object) -> None:
    me = Identity("h", odd, 1, 4, "t", "m")  # type: ignore[arg-type]
    assert me.raw == _json(me)


@given(_ints.filter(lambda n: n >= 1), _ints.filter(lambda n: n >= 1), _texts)
def test_the_world_size_of_an_identity_is_told_without_parsing_it(
    world_size: int, other: int, host: str
) -> None:
    raw = Identity(host, 12, 0, world_size, "t", "m").raw
    assert Identity.of_world_size(raw, world_size)
    assert Identity.of_world_size(raw, other) == (other == world_size)


def test_bytes_that_are_not_an_identity_are_left_to_the_parser() -> None:
    for raw in (b"", b"64", b'{"world_size": 64}', b'garbage ,"world_size":6}'):
        assert not Identity.of_world_size(raw, 64)


@given(_texts, st.floats(allow_nan=False, allow_infinity=False))
def test_a_complete_verdict_is_told_by_its_first_and_last_bytes(host: str, at: float) -> None:
    by = Identity(host, 3, 0, 8, "t", "m").as_dict()
    raw = encode_verdict({"status": "complete", "by": by, "at": at})
    assert is_complete(raw)
    assert decode_verdict(raw, "done")["status"] == "complete"


@given(st.sampled_from(["aborted", "closed"]), _texts)
def test_a_failed_or_closed_verdict_is_never_taken_for_complete(status: str, text: str) -> None:
    by = Identity("h", 3, 0, 8, "t", "m").as_dict()
    verdict = {"status": status, "by": by, "at": 1.0, "reason": "timeout", "message": text}
    raw = encode_verdict(verdict)
    assert not is_complete(raw)
    assert decode_verdict(raw, "done")["status"] == status


def test_a_complete_verdict_written_in_another_form_is_left_to_the_parser() -> None:
    by = Identity("h", 3, 0, 8, "t", "m").as_dict()
    raw = json.dumps({"status": "complete", "at": 1.0, "by": by}).encode()  # keys unsorted
    assert not is_complete(raw)
    assert decode_verdict(raw, "done")["status"] == "complete"  # still read as complete


def test_an_unseeded_clients_jitter_seeds_nothing_and_ignores_the_programs_seed() -> None:
    state = random.getstate()
    try:
        draws = []
        for _ in range(2):  # two nodes whose program seeded ``random`` alike
            random.seed(11)
            lazy = LazyRandom()
            draws.append([lazy.uniform(0.5, 1.0) for _ in range(4)])
            assert lazy._random is None  # no generator of its own was seeded
        assert all(0.5 <= d <= 1.0 for d in draws[0] + draws[1])
        assert draws[0] != draws[1]  # (equal with probability ~2**-200)
    finally:
        random.setstate(state)


# --- add_then_get: a member's count, the arbiter's CHECK and the verdict's read, one write --


@pytest.fixture
def server() -> Iterator[StoreServer]:
    with StoreServer("127.0.0.1", 0) as started:
        yield started


def _store(server: StoreServer) -> TCPStore:
    return TCPStore("127.0.0.1", server.port, timeout=10.0)


def _count(store: TCPStore, rank: int = 1) -> tuple[int, bool, HeldGet]:
    counted = store.add_then_get(
        "count", 1, f"confirmed/{rank}", b"due", ("joined", f"{rank},"), "arbiter", "done"
    )
    assert counted is not None
    return counted


def test_a_count_returns_the_sum_and_the_check_and_its_writes_are_applied(
    server: StoreServer,
) -> None:
    with _store(server) as member, _store(server) as other:
        other.set("arbiter", b"host")
        joined, arbitrated, held = _count(member)
        try:
            assert (joined, arbitrated) == (1, True)
            assert other.get("confirmed/1") == b"due"
            assert other.get("joined") == b"1,"
            other.set("done", b"verdict")
            assert held.get(10.0) == b"verdict"
        finally:
            held.release()
        assert member.add("count", 0) == 1  # the connection is in step
        joined, arbitrated, held = _count(member, 2)
        held.release()
        assert (joined, arbitrated) == (2, True)


def test_a_held_read_that_times_out_leaves_the_connection_usable(server: StoreServer) -> None:
    with _store(server) as member:
        joined, arbitrated, held = _count(member)
        assert (joined, arbitrated) == (1, False)
        with pytest.raises(StoreTimeoutError, match=r"wait timeout after 50ms, keys: /done"):
            held.get(0.05)
        assert member.check(["confirmed/1"])  # cancelled: no reply left outstanding
        held.release()  # already ended: nothing to do


def test_cancelling_a_held_read_gives_the_value_if_it_came_first_else_frees_the_connection(
    server: StoreServer,
) -> None:
    with _store(server) as member, _store(server) as other:
        held = _count(member)[2]
        assert held.cancel() is None
        assert member.add("count", 0) == 1
        other.set("done", b"verdict")
        held = _count(member, 2)[2]
        assert held.cancel() == b"verdict"
        assert member.get("done") == b"verdict"


def test_other_calls_on_the_connection_wait_until_the_held_read_ends(
    server: StoreServer,
) -> None:
    with _store(server) as member, _store(server) as other:
        held = _count(member)[2]
        checking = InThread(member.check, ["count"])
        assert not checking.done.wait(0.2)  # the connection is the held read's
        other.set("done", b"verdict")
        assert held.get(10.0) == b"verdict"
        assert checking.outcome() is True


def test_releasing_a_held_read_nobody_ended_cancels_it(server: StoreServer) -> None:
    with _store(server) as member:
        _count(member)[2].release()
        assert member.add("count", 0) == 1  # in step: the WAIT was cancelled, not left


def test_a_store_that_cannot_serve_behind_a_wait_gets_nothing(server: StoreServer) -> None:
    with _store(server) as member:
        member._requests.pipelined = False  # as the handshake finds torch's server
        assert member.add_then_get("count", 1, "c", b"v", ("j", "1,"), "arbiter", "done") is None
        assert not member.check(["count"])  # nothing was sent
