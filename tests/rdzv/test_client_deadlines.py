"""The client's honesty: every blocking call ends by its deadline, a connection known to be
dead raises at once, and each message states what was observed (EOF, reset, silence).

The frozen store hosts are real: a store server in a child process stopped with SIGSTOP,
or a scripted peer that answers the handshake and then goes silent or stops reading.
Nothing here asserts a duration; pytest-timeout catches a call that does not return.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from scripted_peer import ScriptedPeer

from conftest import InThread, ServerProcess
from rdzv.errors import (
    StoreClosedError,
    StoreConnectionError,
    StoreProtocolError,
    StoreTimeoutError,
)
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import format_elapsed

_STOP = _wire.encode_u8(_wire.STOP_WAITING)
_CANCELED = _wire.encode_u8(_wire.WAIT_CANCELED)
_AT = r"127\.0\.0\.1:\d+"


@contextlib.contextmanager
def _frozen(server: ServerProcess) -> Iterator[None]:
    """Freeze the store host's process (SIGSTOP); always thaw it afterwards."""
    os.kill(server.pid, signal.SIGSTOP)
    try:
        # The signal is asynchronous: wait (as its parent) until the child has stopped.
        _, status = os.waitpid(server.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), status
        yield
    finally:
        os.kill(server.pid, signal.SIGCONT)


@pytest.fixture(params=[True, False], ids=["rdzv-peer", "torch-peer"])
def peer(request: pytest.FixtureRequest) -> Iterator[ScriptedPeer]:
    scripted = ScriptedPeer(pipelined=request.param)
    try:
        yield scripted
    finally:
        scripted.close()


@pytest.fixture
def rdzv_peer() -> Iterator[ScriptedPeer]:
    scripted = ScriptedPeer(pipelined=True)
    try:
        yield scripted
    finally:
        scripted.close()


def _until_the_client_sees_the_close(store: TCPStore) -> None:
    """Wait (on the socket, not a clock) until the peer's FIN or RST reached the client."""
    ready, _, _ = select.select([store._channel.sock], [], [], 10)
    assert ready, "the close never reached the client"


# --- a frozen store host: every call ends by its deadline ---------------------------------


def test_a_get_from_a_frozen_store_host_times_out_and_says_the_cancel_went_unanswered(
    server_process: ServerProcess,
) -> None:
    with (
        TCPStore(server_process.host, server_process.port, timeout=1.0) as client,
        _frozen(server_process),
    ):
        with pytest.raises(
            StoreTimeoutError,
            match=(
                rf"^wait timeout after 1000ms, keys: /k \(store at {_AT}\); the store did "
                r"not answer CANCEL_WAIT within 0\.4 s after that deadline either, so the "
                r"connection was closed$"
            ),
        ):
            client.get("k")
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^CHECK was not sent: this client's connection to the store at {_AT} was "
                r"closed earlier \(the store did not answer CANCEL_WAIT after a timed-out "
                r"GET\); create a new client to reconnect$"
            ),
        ):
            client.check(["k"])


def test_a_request_to_a_frozen_store_host_times_out_naming_the_request(
    server_process: ServerProcess,
) -> None:
    with (
        TCPStore(server_process.host, server_process.port, timeout=1.0) as client,
        _frozen(server_process),
        pytest.raises(
            StoreTimeoutError,
            match=rf"^no reply to ADD from the store at {_AT} within 1000ms; the connection "
            "was closed$",
        ),
    ):
        client.add("n", 1)


def test_connecting_to_a_frozen_store_host_gives_up_at_the_deadline_naming_the_silence(
    server_process: ServerProcess,
) -> None:
    with (
        _frozen(server_process),
        pytest.raises(
            StoreConnectionError,
            match=(
                rf"^something at {_AT} accepts connections but never answers the handshake: .*"
                r"gave up after \d+ connection attempts? in \d+\.\d\d s \(timeout 1 s\); last "
                r"cause: the peer accepted the connection but did not answer the handshake"
            ),
        ),
    ):
        TCPStore(server_process.host, server_process.port, timeout=1.0)


def test_a_wait_whose_cancel_goes_unanswered_names_the_keys_and_closes_the_connection(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        with pytest.raises(
            StoreTimeoutError,
            match=(
                rf"^wait timeout after 200ms, keys: /a, /b \(store at {_AT}\); the store did "
                r"not answer CANCEL_WAIT within 0\.4 s after that deadline either, so the "
                r"connection was closed$"
            ),
        ):
            client.wait(["a", "b"], 0.2)
        peer.expect(_wire.Wait)
        peer.expect(_wire.CancelWait)
        with pytest.raises(StoreClosedError, match=r"^SET was not sent: .*CANCEL_WAIT"):
            client.set("a", "1")


def test_keys_that_arrive_at_the_deadline_with_a_reply_that_never_comes_time_out(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        # The keys arrive in the race; then the store goes silent before the value.
        peer.answer(_wire.CancelWait, _STOP if peer.pipelined else _STOP + _CANCELED)
        client.set_timeout(0.1)
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        if peer.pipelined:
            peer.expect(_wire.Get)
        peer.expect(_wire.CancelWait)
        with pytest.raises(
            StoreTimeoutError,
            match=(
                rf"^wait timeout after 100ms, keys: /k \(store at {_AT}\): the keys arrived, but "
                r"the store did not send its reply to GET by 0\.4 s after the deadline; the "
                r"connection was closed$"
            ),
        ):
            getter.outcome()


def test_a_late_stop_waiting_never_acknowledged_by_a_torch_store_fails_the_get_unsent() -> None:
    peer = ScriptedPeer(pipelined=False)
    try:
        with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
            peer.answer(_wire.CancelWait, _STOP)  # ... and never the WAIT_CANCELED after it
            client.set_timeout(0.1)
            getter = InThread(client.get, "k")
            peer.expect(_wire.Wait)
            peer.expect(_wire.CancelWait)
            with pytest.raises(
                StoreTimeoutError,
                match=(
                    r"^wait timeout after 100ms, keys: /k .*: the keys arrived as the deadline "
                    r"passed, but the store did not acknowledge CANCEL_WAIT within 0\.4 s after "
                    r"it, so GET was not sent and the connection was closed$"
                ),
            ):
                getter.outcome()
            assert peer.requests.empty()
    finally:
        peer.close()


def test_a_wait_whose_keys_arrive_late_returns_though_the_cancel_is_never_acknowledged(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        peer.answer(_wire.CancelWait, _STOP)  # the keys are there; WAIT_CANCELED never comes
        waiter = InThread(client.wait, ["k"], 0.1)
        peer.expect(_wire.Wait)
        peer.expect(_wire.CancelWait)
        assert waiter.outcome() is None
        with pytest.raises(
            StoreClosedError,
            match=r"^ADD was not sent: .*closed earlier \(the store did not acknowledge "
            r"CANCEL_WAIT after a late STOP_WAITING \(WAIT\)\)",
        ):
            client.add("n", 1)


def test_a_late_value_is_returned_though_the_cancel_is_never_acknowledged(
    rdzv_peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0) as client:
        # The value, and no WAIT_CANCELED after it.
        rdzv_peer.answer(_wire.CancelWait, _STOP + _wire.encode_bytes(b"late"))
        client.set_timeout(0.1)
        getter = InThread(client.get, "k")
        for kind in (_wire.Wait, _wire.Get, _wire.CancelWait):
            rdzv_peer.expect(kind)
        assert getter.outcome() == b"late"
        with pytest.raises(StoreClosedError, match=r"did not acknowledge CANCEL_WAIT"):
            client.check(["k"])


def test_a_set_that_a_frozen_store_never_reads_times_out_instead_of_blocking() -> None:
    peer = ScriptedPeer(pipelined=True, freeze_after_handshake=True)
    try:
        with TCPStore("127.0.0.1", peer.port, timeout=0.5) as client:
            assert peer.handshaken.wait(10)
            big = b"x" * (32 * 1024 * 1024)  # more than every socket buffer on the way
            with pytest.raises(
                StoreTimeoutError,
                match=(
                    rf"^could not send SET to the store at {_AT} within 500ms: it stopped "
                    r"reading \(its host is frozen or overloaded, or the network path "
                    r"stalled\); the connection was closed$"
                ),
            ):
                client.set("big", big)
            with pytest.raises(
                StoreClosedError, match=r"closed earlier \(sending SET did not finish"
            ):
                client.set("small", "v")
    finally:
        peer.close()


# --- what was observed: EOF or reset --------------------------------------------------------


def test_a_reset_while_waiting_is_reported_as_a_reset_without_guessing_a_crash(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        peer.reset()
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^connection reset by peer at {_AT} during GET: the store host's process "
                r"ended abruptly or closed the connection with requests unread, or something "
                r"on the network path \(a proxy, a firewall\) reset it$"
            ),
        ) as info:
            getter.outcome()
    assert info.value.seen == "reset"


def test_a_reset_during_add_never_suggests_a_value_that_is_not_an_integer(
    rdzv_peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0) as client:
        adder = InThread(client.add, "n", 1)
        rdzv_peer.expect(_wire.Add)
        rdzv_peer.reset()
        with pytest.raises(
            StoreClosedError, match=rf"^connection reset by peer at {_AT} during ADD: "
        ) as info:
            adder.outcome()
    assert "integer" not in str(info.value)


def test_a_clean_close_right_after_add_mentions_a_value_that_is_not_an_integer(
    rdzv_peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0) as client:
        adder = InThread(client.add, "n", 1)
        rdzv_peer.expect(_wire.Add)
        rdzv_peer.hang_up()
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^the store at {_AT} closed the connection \(EOF\) during ADD: the store host "
                r"shut down or exited, gave up on this client, or rejected a request; the "
                r"request was an ADD, which a TCPStore server rejects by closing the "
                r"connection when the key's value is not an integer$"
            ),
        ):
            adder.outcome()


def test_a_clean_close_during_get_says_the_store_closed_it_and_nothing_about_integers(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        peer.hang_up()
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^the store at {_AT} closed the connection \(EOF\) during GET: the store host "
                r"shut down or exited, gave up on this client, or rejected a request$"
            ),
        ) as info:
            getter.outcome()
    assert info.value.seen == "eof"


def test_a_close_after_a_wait_timed_out_is_a_timeout_that_mentions_the_close(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        peer.hang_up_on(_wire.CancelWait)
        waiter = InThread(client.wait, ["k"], 0.1)
        peer.expect(_wire.Wait)
        peer.expect(_wire.CancelWait)
        with pytest.raises(
            StoreTimeoutError,
            match=(
                rf"^wait timeout after 100ms, keys: /k \(store at {_AT}\); after that deadline, "
                rf"the store at {_AT} closed the connection \(EOF\) during CANCEL_WAIT: "
            ),
        ) as info:
            waiter.outcome()
    assert isinstance(info.value.__cause__, StoreClosedError)
    assert info.value.__cause__.seen == "eof"


def test_a_store_that_says_it_shuts_down_during_a_wait_is_reported_as_shut_down(
    rdzv_peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        rdzv_peer.expect(_wire.Wait)
        rdzv_peer.send(_CANCELED)  # unprompted: what an rdzv server sends when it closes
        with pytest.raises(
            StoreClosedError,
            match=rf"^the store at {_AT} shut down while this client waited for k \(GET\)$",
        ) as info:
            getter.outcome()
        assert info.value.seen == "shutdown"
        with pytest.raises(StoreClosedError, match=r"^SET was not sent: .*shut down"):
            client.set("k", "v")


def test_a_wait_answered_with_junk_is_a_protocol_error_and_closes_the_connection(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        peer.send(b"\x07")
        with pytest.raises(
            StoreProtocolError, match=r"^unexpected reply 7 to WAIT \(GET\) from the store at "
        ):
            getter.outcome()
        with pytest.raises(StoreClosedError, match=r"broke the protocol"):
            client.check(["k"])


# --- a connection known to be dead: every call raises at once -------------------------------

_WRITES: dict[str, Callable[[TCPStore], None]] = {
    "SET": lambda store: store.set("k", "v"),
    "MULTI_SET": lambda store: store.multi_set(["k"], ["v"]),
    "APPEND": lambda store: store.append("k", "v"),
    "QUEUE_PUSH": lambda store: store.queue_push("q", "v"),
}


@pytest.mark.parametrize("op", sorted(_WRITES))
def test_a_write_after_the_store_server_closed_raises_instead_of_being_lost(op: str) -> None:
    server = StoreServer("127.0.0.1", 0).start()
    try:
        with TCPStore("127.0.0.1", server.port, timeout=10.0) as client:
            client.set("before", "1")
            assert client.check(["before"])
            server.close()
            _until_the_client_sees_the_close(client)
            with pytest.raises(
                StoreClosedError,
                match=(
                    rf"^the store at {_AT} closed the connection \(EOF\) before {op} was sent, "
                    rf"so {op} was not sent: the store host shut down or exited"
                ),
            ):
                _WRITES[op](client)
    finally:
        server.close()


def test_a_set_after_the_store_host_process_was_killed_raises_at_once(
    server_process: ServerProcess,
) -> None:
    with TCPStore(server_process.host, server_process.port, timeout=10.0) as client:
        client.set("before", "1")
        assert client.check(["before"])
        server_process.proc.kill()
        server_process.proc.wait(timeout=30)
        _until_the_client_sees_the_close(client)
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^(the store at {_AT} closed the connection \(EOF\)|connection reset by peer "
                rf"at {_AT}) before SET was sent, so SET was not sent: "
            ),
        ):
            client.set("after", "2")


def test_a_set_after_a_reset_raises_naming_the_reset(rdzv_peer: ScriptedPeer) -> None:
    with TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0) as client:
        rdzv_peer.reset()
        _until_the_client_sees_the_close(client)
        with pytest.raises(
            StoreClosedError,
            match=(
                rf"^connection reset by peer at {_AT} before SET was sent, so SET was not "
                r"sent: .*something on the network path \(a proxy, a firewall\) reset it$"
            ),
        ):
            client.set("k", "v")


def test_every_call_after_a_lost_connection_raises_at_once_naming_the_first_failure(
    peer: ScriptedPeer,
) -> None:
    with TCPStore("127.0.0.1", peer.port, timeout=10.0) as client:
        getter = InThread(client.get, "k")
        peer.expect(_wire.Wait)
        peer.hang_up()
        with pytest.raises(StoreClosedError, match=r"closed the connection \(EOF\) during GET"):
            getter.outcome()
        first = re.escape(f"(the store at 127.0.0.1:{peer.port} closed the connection (EOF)")
        for op, call in [
            ("SET", lambda: client.set("k", "v")),
            ("CHECK", lambda: client.check(["k"])),
            ("GET", lambda: client.get("k")),
            ("ADD", lambda: client.add("n", 1)),
        ]:
            with pytest.raises(
                StoreClosedError,
                match=rf"^{op} was not sent: this client's connection .* was closed earlier "
                rf"{first} during GET\)",
            ):
                call()


def test_a_closed_client_refuses_further_calls_saying_it_was_closed(
    rdzv_peer: ScriptedPeer,
) -> None:
    client = TCPStore("127.0.0.1", rdzv_peer.port, timeout=10.0)
    client.close()
    with pytest.raises(
        StoreClosedError, match=r"^SET was not sent: .* was closed earlier \(close\(\) was called\)"
    ):
        client.set("k", "v")


# --- figures in messages ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "digits", "shown"),
    [
        (7.951, 1, "8.0"),
        (7.999, 1, "8.0"),
        (2.941, 1, "3.0"),
        (3.0, 1, "3.0"),
        (0.1 + 0.2, 2, "0.30"),  # floating-point noise is not rounded up
        (5.004, 2, "5.01"),
    ],
)
def test_elapsed_figures_are_rounded_up_so_a_passed_deadline_never_reads_short(
    elapsed: float, digits: int, shown: str
) -> None:
    assert format_elapsed(elapsed, digits) == shown


def test_a_master_waiting_for_workers_never_reports_less_than_its_timeout() -> None:
    with pytest.raises(
        StoreTimeoutError,
        match=r"^Timed out after (\d+\.\d) seconds waiting for clients\. [01]/2 clients joined",
    ) as info:
        TCPStore("127.0.0.1", 0, 2, True, timeout=1.0)
    found = re.match(r"Timed out after (\d+\.\d) seconds", str(info.value))
    assert found
    assert float(found[1]) >= 1.0


def test_a_clone_given_a_timeout_is_bounded_by_it_and_leaves_the_original_its_own() -> None:
    with (
        StoreServer("127.0.0.1", 0) as server,
        TCPStore("127.0.0.1", server.port, timeout=300) as store,
    ):
        with store.clone(timeout=0.2) as fresh:
            assert fresh.timeout == timedelta(seconds=0.2)
            with pytest.raises(StoreTimeoutError, match="never-set"):
                fresh.get("never-set")  # bounded by the clone's 0.2 s, not by 300 s
        assert store.timeout == timedelta(seconds=300)
        with store.clone() as same:
            assert same.timeout == timedelta(seconds=300)


def test_a_server_closed_on_its_own_loop_thread_stops_without_waiting_for_itself() -> None:
    # A finalizer the garbage collector runs on the loop thread may close the server there:
    # close() must not wait on the loop it is blocking.
    server = StoreServer("127.0.0.1", 0).start()
    thread = server._thread
    loop = server._loop
    assert thread is not None and loop is not None
    returned = threading.Event()

    def close_here() -> None:
        server.close()
        returned.set()

    loop.call_soon_threadsafe(close_here)
    assert returned.wait(30), "close() on the loop thread blocked"
    thread.join(30)
    assert not thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
