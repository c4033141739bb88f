"""The express (issue 25): a member's happy path made straight on the socket
(:mod:`rdzv.store.client._express`, scripted by :mod:`rdzv.rendezvous._express`).

It must cost less and change nothing else: every reply is the one the general client gives,
every failure is raised as the general client raises it (type, what was seen, message), and
the connection it leaves behind is a working ``TCPStore``. Each case runs the same store call
both ways, against a peer scripted alike, and compares.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Generator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from scripted_peer import ScriptedPeer

from conftest import InThread
from rdzv.errors import (
    StoreClosedError,
    StoreConnectionError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)
from rdzv.store.client import TCPStore, express
from rdzv.store.server import StoreServer
from rdzv.store.wire import _wire

_COUNT = ("n", 1, "c", b"v", ("j", "1,"), "arb", "done")  # add_then_get's arguments


@pytest.fixture
def server() -> Iterator[StoreServer]:
    with StoreServer("127.0.0.1", 0) as started:
        yield started


def _script(
    steps: list[tuple[str, Any, float]], results: list[tuple[str, Any]]
) -> Generator[tuple[str, Any, float], Any, str]:
    """Makes ``steps`` in order, noting each reply or failure in ``results``; stops at the
    first failure."""
    for step in steps:
        try:
            results.append(("reply", (yield step)))
        except StoreError as exc:
            results.append(("error", exc))
            return "failed"
    return "done"


def _express(port: int, steps: list[tuple[str, Any, float]]) -> tuple[list[Any], Any]:
    results: list[tuple[str, Any]] = []
    ended = express("127.0.0.1", port, None, 30.0, 10.0, _script(steps, results))
    return results, ended


def _general(port: int) -> TCPStore:
    return TCPStore("127.0.0.1", port, None, False, 30.0, wait_for_workers=False)


def _same_failure(straight: BaseException, general: BaseException) -> None:
    """The same exception type, the same observation, the same words (ports aside)."""

    def words(exc: BaseException) -> str:
        return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", str(exc))

    assert type(straight) is type(general)
    assert getattr(straight, "seen", None) == getattr(general, "seen", None)
    assert words(straight) == words(general)


# --- the happy path ----------------------------------------------------------------------


def test_the_express_replies_as_the_general_client_and_leaves_a_working_store(
    server: StoreServer,
) -> None:
    claims = [("first", "", b"me"), ("claim/1", "", b"me")]
    with _general(server.port) as writer:
        writer.set("first", b"other")  # one claim is held by another already
        results, ended = _express(
            server.port,
            [("compare_sets", claims, 5.0), ("add_then_get", _COUNT, 5.0)],
        )
        assert ended.ran and ended.value == "done"
        assert results == [("reply", [b"other", b"me"]), ("reply", [1, False])]
        assert ended.held is not None  # the WAIT+GET is still out: the caller's to end
        writer.set("done", b"verdict")
        assert ended.held.get(5.0) == b"verdict"
        store = ended.store
        with store:
            assert (store.get("c"), store.get("j"), store.check(["arb"])) == (b"v", b"1,", False)
            assert store.add("n", 0) == 1
            general = writer.compare_sets(claims)  # what the general client gets now
            assert general == [b"other", b"me"]


def test_the_express_reads_the_held_value_and_acknowledges_it(server: StoreServer) -> None:
    with _general(server.port) as writer:
        writer.set("arb", b"1")
        writer.set("done", b"verdict")  # there before the wait: STOP_WAITING at once
        steps = [
            ("add_then_get", _COUNT, 5.0),
            ("get_held", (), 5.0),
            ("set", ("ack", b"1"), 5.0),
        ]
        results, ended = _express(server.port, steps)
        assert results == [("reply", [1, True]), ("reply", b"verdict"), ("reply", None)]
        assert ended.held is None
        assert ended.store.timeout == timedelta(seconds=30)  # the store's, not the steps' 5 s
        with ended.store:
            assert writer.get("ack") == b"1"
            assert ended.store.get("done") == b"verdict"  # in step: nothing left unread


def test_a_reply_that_arrives_in_pieces_is_read_whole() -> None:
    peer = ScriptedPeer(pipelined=True)
    try:
        reply = _wire.encode_bytes(b"a" * 300) + _wire.encode_bytes(b"me")
        got = InThread(_express, peer.port, [("compare_sets", [("k", "", "x")] * 2, 10.0)])
        peer.expect(_wire.CompareSet)
        peer.expect(_wire.CompareSet)
        for start in range(0, len(reply), 7):
            peer.send(reply[start : start + 7])
        results, ended = got.outcome()
        assert results == [("reply", [b"a" * 300, b"me"])]
        ended.store.close()
    finally:
        peer.close()


# --- failures: the general client's, raised where the script yielded -----------------------


def _both(
    scenario: Callable[[ScriptedPeer], None],
    steps: list[tuple[str, Any, float]],
    general: Callable[[TCPStore], Any],
) -> tuple[BaseException, BaseException]:
    """``steps`` made by the express and ``general`` by a TCPStore, each against a peer
    scripted by ``scenario``; the failure of each."""
    peer = ScriptedPeer(pipelined=True)
    try:
        scenario(peer)
        results, ended = _express(peer.port, steps)
        ended.store.close()
        kind, straight = results[-1]
        assert kind == "error", results
        assert ended.store.timeout == timedelta(seconds=30)  # its own, not the steps' any more
    finally:
        peer.close()
    peer = ScriptedPeer(pipelined=True)
    try:
        scenario(peer)
        store = _general(peer.port)
        try:
            general(store)
        except StoreError as exc:
            failure: BaseException = exc
        else:
            raise AssertionError("the general client did not fail")
        finally:
            store.close()
    finally:
        peer.close()
    return straight, failure


_CLAIMS = [("first", "", b"me"), ("claim/1", "", b"me")]


def _compare_sets(seconds: float) -> tuple[list[tuple[str, Any, float]], Callable[..., Any]]:
    def general(store: TCPStore) -> Any:
        store.set_timeout(seconds)
        return store.compare_sets(_CLAIMS)

    return [("compare_sets", _CLAIMS, seconds)], general


def _held(seconds: float) -> tuple[list[tuple[str, Any, float]], Callable[..., Any]]:
    """The count, then the read of its WAIT+GET within ``seconds``: both ways."""

    def general(store: TCPStore) -> Any:
        store.set_timeout(5.0)
        counted = store.add_then_get(*_COUNT)
        assert counted is not None
        return counted[2].get(seconds)

    return [("add_then_get", _COUNT, 5.0), ("get_held", (), seconds)], general


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(lambda peer: None, id="no-reply"),
        pytest.param(lambda peer: peer.answer(_wire.CompareSet, b"\x02\x00"), id="half-a-reply"),
        pytest.param(lambda peer: peer.hang_up_on(_wire.CompareSet), id="eof"),
        pytest.param(
            lambda peer: peer.answer(_wire.CompareSet, b"\xff" * 8), id="a-reply-too-long"
        ),
    ],
)
def test_a_failed_exchange_is_raised_as_the_general_client_raises_it(
    scenario: Callable[[ScriptedPeer], None],
) -> None:
    steps, general = _compare_sets(0.3)
    straight, failure = _both(scenario, steps, general)
    _same_failure(straight, failure)
    assert isinstance(straight, StoreTimeoutError | StoreClosedError | StoreProtocolError)


def test_a_reset_is_named_a_reset() -> None:
    def scenario(peer: ScriptedPeer) -> None:
        def reset_on_claims() -> None:
            peer.expect(_wire.CompareSet)
            peer.reset()

        InThread(reset_on_claims)

    steps, general = _compare_sets(10.0)
    straight, failure = _both(scenario, steps, general)
    _same_failure(straight, failure)
    assert getattr(straight, "seen", None) == "reset"


def test_a_held_value_that_does_not_come_is_a_timeout_after_the_cancel_is_answered() -> None:
    def scenario(peer: ScriptedPeer) -> None:
        peer.answer(_wire.Add, _wire.encode_i64(1) + _wire.encode_u8(_wire.READY))
        peer.answer(_wire.CancelWait, _wire.encode_u8(_wire.WAIT_CANCELED))

    straight, failure = _both(scenario, *_held(0.3))
    _same_failure(straight, failure)
    assert isinstance(straight, StoreTimeoutError)


def test_a_store_that_shuts_down_during_the_held_wait_is_a_closed_connection() -> None:
    def scenario(peer: ScriptedPeer) -> None:
        canceled = _wire.encode_u8(_wire.WAIT_CANCELED)  # unprompted: it shuts down
        peer.answer(_wire.Add, _wire.encode_i64(1) + _wire.encode_u8(_wire.READY) + canceled)

    straight, failure = _both(scenario, *_held(5.0))
    _same_failure(straight, failure)
    assert getattr(straight, "seen", None) == "shutdown"


@pytest.mark.parametrize(("end", "seen"), [("hang_up", "eof"), ("reset", "reset")])
def test_a_write_without_a_reply_is_not_sent_on_a_connection_the_store_closed(
    end: str, seen: str
) -> None:
    """The store closed the connection (EOF) or reset it between the script's calls: the
    SET that follows is not sent, and the failure names what was seen."""
    peer = ScriptedPeer(pipelined=True)
    ended = threading.Event()
    failures: list[BaseException] = []

    def script() -> Generator[tuple[str, Any, float], Any, None]:
        yield ("compare_sets", _CLAIMS[:1], 5.0)
        assert ended.wait(10)  # the store closed the connection meanwhile
        try:
            yield ("set", ("ack", b"1"), 5.0)
        except StoreError as exc:
            failures.append(exc)

    try:
        peer.answer(_wire.CompareSet, _wire.encode_bytes(b"me"))
        got = InThread(express, "127.0.0.1", peer.port, None, 30.0, 10.0, script())
        peer.expect(_wire.CompareSet)
        getattr(peer, end)()
        ended.set()
        got.outcome().store.close()
    finally:
        peer.close()
    [straight] = failures
    assert isinstance(straight, StoreClosedError) and straight.seen == seen
    assert "before SET was sent, so SET was not sent" in str(straight)
    assert peer.requests.empty()  # nothing after the claims reached the store


def test_a_write_without_a_reply_that_the_store_does_not_read_fails_as_the_general_set() -> None:
    """A store that stops reading (a frozen host): the write that the socket does not take
    whole at once waits for it within the step's seconds, then fails as the general set."""
    value = b"x" * (8 * 1024 * 1024)  # more than the socket buffers hold
    failures: list[BaseException] = []
    for way in ("express", "general"):
        peer = ScriptedPeer(pipelined=True, freeze_after_handshake=True)
        try:
            if way == "express":
                results, ended = _express(peer.port, [("set", ("k", value), 0.3)])
                ended.store.close()
                [(kind, failure)] = results
                assert kind == "error", results
            else:
                with _general(peer.port) as store:
                    store.set_timeout(0.3)
                    with pytest.raises(StoreError) as raised:
                        store.set("k", value)
                failure = raised.value
            failures.append(failure)
        finally:
            peer.close()
    straight, general = failures
    _same_failure(straight, general)
    assert isinstance(straight, StoreTimeoutError)


def test_on_a_store_that_cannot_pipeline_the_script_does_not_run() -> None:
    peer = ScriptedPeer(pipelined=False)
    try:
        results, ended = _express(peer.port, [("compare_sets", _CLAIMS, 5.0)])
        assert (results, ended.ran, ended.value, ended.held) == ([], False, None, None)
        with ended.store as store:
            assert store.pipelined is False  # the general client took the connection
    finally:
        peer.close()


def test_a_first_attempt_that_fails_is_counted_by_the_general_connect() -> None:
    with socket.socket() as unused:  # bound, never listening: every attempt is refused
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        steps = [("compare_sets", _CLAIMS, 5.0)]
        results: list[tuple[str, Any]] = []
        with pytest.raises(StoreConnectionError) as straight:
            express("127.0.0.1", port, None, 30.0, 0.3, _script(steps, results))
        with pytest.raises(StoreConnectionError) as general:
            TCPStore("127.0.0.1", port, None, False, 30.0, False, connect_timeout=0.3)
    assert results == []
    for error in (straight.value, general.value):
        attempts = re.search(r"gave up after (\d+) connection attempts", str(error))
        assert attempts is not None and int(attempts[1]) >= 2, error
        assert error.connect_cause == "refused"


def test_a_script_that_raises_leaves_no_connection_open() -> None:
    peer = ScriptedPeer(pipelined=True)
    peer.answer(_wire.CompareSet, _wire.encode_bytes(b"me"))

    def script() -> Generator[tuple[str, Any, float], Any, None]:
        yield ("compare_sets", _CLAIMS[:1], 5.0)
        raise KeyboardInterrupt  # as a signal's handler would, mid-join

    try:
        with pytest.raises(KeyboardInterrupt):
            express("127.0.0.1", peer.port, None, 30.0, 10.0, script())
        peer._thread.join(10)  # it serves one connection: it ends when that one closes
        assert not peer._thread.is_alive()
    finally:
        peer.close()


def test_a_first_attempt_refused_is_retried_and_the_script_runs_on_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rdzv.store.client._express as store_express

    refused, real = threading.Event(), store_express.first_attempt

    def first(*args: Any) -> Any:
        attempt = real(*args)
        refused.set()
        return attempt

    monkeypatch.setattr(store_express, "first_attempt", first)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # not listening yet: the first attempt is refused
    port = sock.getsockname()[1]
    steps = [("compare_sets", _CLAIMS, 5.0)]
    results: list[tuple[str, Any]] = []
    got = InThread(express, "127.0.0.1", port, None, 30.0, 20.0, _script(steps, results))
    try:
        assert refused.wait(30)
        with StoreServer("127.0.0.1", port, listen_fd=sock.detach()):  # node 0, late
            ended = got.outcome()
            with ended.store as store:
                assert (ended.ran, ended.value, results) == (True, "done", [("reply", [b"me"] * 2)])
                assert store.connect_attempts >= 2  # the refused one counted
                assert store.get("claim/1") == b"me"
    finally:
        sock.close()
