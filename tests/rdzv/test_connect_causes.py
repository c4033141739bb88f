"""The final connect error says what the network did (refused, reset, no answer, no route,
a name that does not resolve), and the rendezvous's advice follows that cause.

The causes are fed in at the dial (the kernel's errors as the socket raises them); the
netns world's scenarios make "no answer" and "no route" real (tests/netns/).
"""

from __future__ import annotations

import errno
import pickle
import random
import socket

import pytest
from round_config import round_cfg

from rdzv.errors import (
    RendezvousConnectionError,
    StoreClosedError,
    StoreConnectionError,
)
from rdzv.rendezvous._round_failures import connect_error
from rdzv.store.client import _causes, _connect
from rdzv.store.wire import _wire


def _failure(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> StoreConnectionError:
    def dial(host: str, port: int, deadline: float | None, bound: float) -> socket.socket:
        raise error

    monkeypatch.setattr(_connect, "_dial", dial)
    with pytest.raises(StoreConnectionError) as info:
        _connect.connect("127.0.0.1", 29400, 0.05, random.Random(1), _wire.Limits())
    return info.value


def _fail_with(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> str:
    return str(_failure(monkeypatch, error))


def _advice(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Raise the rendezvous error rank 1 gets when its connect failed with ``error``."""
    raise connect_error(round_cfg(1), _failure(monkeypatch, error), 0.05)


def test_a_refused_connect_is_called_refused_and_says_nothing_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = _fail_with(monkeypatch, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert "(refused: the host answered but nothing listens on that port" in message


def test_a_reset_connect_is_called_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    message = _fail_with(monkeypatch, ConnectionResetError(errno.ECONNRESET, "reset"))
    assert "(reset: the host, or something on the path" in message


def test_a_connect_without_any_answer_says_filtered_or_host_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = _fail_with(monkeypatch, _connect._NoAnswer("no answer within 0.05 s"))
    assert "last cause: no answer within 0.05 s" in message
    assert "no answer to the connection attempt" in message
    assert "a filtered port?" in message and "the host is down" in message
    assert "_NoAnswer" not in message


def test_a_reset_during_the_handshake_is_called_reset_and_explained_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reset = StoreClosedError(
        "connection reset by peer at 127.0.0.1:29400 during handshake: ... or something on "
        "the network path (a proxy, a firewall) reset it"
    )
    reset.seen = "reset"
    failure = _failure(monkeypatch, reset)
    assert failure.connect_cause == "reset"
    assert "(reset: the host" not in str(failure)  # the store's own words already say it


@pytest.mark.parametrize("code", [errno.EHOSTUNREACH, errno.ENETUNREACH])
def test_an_unreachable_address_is_called_no_route(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    message = _fail_with(monkeypatch, OSError(code, "unreachable"))
    assert "(no route to the host: this node cannot reach that address" in message


def test_a_dial_that_times_out_reports_no_answer_not_a_bare_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def connect(self: socket.socket, address: object) -> None:
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket.socket, "connect", connect)
    with pytest.raises(_causes._NoAnswer, match=r"no answer to the connection attempt within"):
        _connect._dial("127.0.0.1", 9, None, 1.0)


def test_a_name_that_does_not_resolve_is_called_unresolvable_with_the_resolver_as_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal = socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    def getaddrinfo(*args: object, **kwargs: object) -> list[object]:
        raise refusal

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(StoreConnectionError) as info:
        _connect.connect("store.rdzv.test", 29500, 0.05, random.Random(1), _wire.Limits())
    assert info.value.connect_cause == "unresolvable"
    assert info.value.__cause__ is refusal
    assert "last cause: 'store.rdzv.test' did not resolve: [Errno" in str(info.value)
    assert "(the host name does not resolve here (DNS))" in str(info.value)


def test_a_connect_failure_survives_pickling_with_its_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failure = _failure(monkeypatch, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    copy = pickle.loads(pickle.dumps(failure))
    assert (str(copy), copy.connect_cause) == (str(failure), "refused")


# --- the rendezvous's advice follows the cause ------------------------------------------


_NO_ROUTE = r"\(no route to the host: .*\)\. Check the addressing .* and the routing between the"


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        pytest.param(
            ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
            r"\(refused: .*\)\. Nothing listens there: check that node 0 started and could bind "
            r"the port .* the same host:port\.$",
            id="refused-nothing-listens-did-node-0-start-and-bind",
        ),
        pytest.param(
            _causes._NoAnswer("no answer within 0.05 s"),
            r"A firewall dropping the port, or a host that is down, looks like this: check that "
            r"the port is open from this node to node 0's host .* and that the host is up\.$",
            id="no-answer-a-firewall-dropping-the-port-or-the-host-down",
        ),
        pytest.param(
            OSError(errno.EHOSTUNREACH, "unreachable"),
            _NO_ROUTE,
            id="host-unreachable-addressing-or-routing",
        ),
        pytest.param(
            OSError(errno.ENETUNREACH, "unreachable"),
            _NO_ROUTE,
            id="network-unreachable-addressing-or-routing",
        ),
        pytest.param(
            ConnectionResetError(errno.ECONNRESET, "reset"),
            r"Something on the path reset it: check what lies between the hosts \(a proxy, a "
            r"firewall\) and what listens on that port \(a different service\?\)\.$",
            id="reset-something-on-the-path",
        ),
        pytest.param(
            _causes._Unresolvable("'store' did not resolve: no such name"),
            r"Check the host name and this node's DNS",
            id="unresolvable-dns",
        ),
    ],
)
def test_the_advice_follows_the_cause_and_only_a_refusal_points_at_node_0s_bind(
    monkeypatch: pytest.MonkeyPatch, error: BaseException, advice: str
) -> None:
    with pytest.raises(RendezvousConnectionError, match=advice) as info:
        _advice(monkeypatch, error)
    assert ("bind the port" in str(info.value)) == isinstance(error, ConnectionRefusedError)


def test_a_peer_that_is_not_a_store_sends_the_user_to_what_holds_the_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ends: list[socket.socket] = []

    def dial(host: str, port: int, deadline: float | None, bound: float) -> socket.socket:
        ends.extend(socket.socketpair())
        ends[-1].sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")  # a web server holds the port
        return ends[-2]

    monkeypatch.setattr(_connect, "_dial", dial)
    try:
        with pytest.raises(StoreConnectionError) as info:
            _connect.connect("127.0.0.1", 29400, 0.05, random.Random(1), _wire.Limits())
    finally:
        for end in ends:
            end.close()
    assert info.value.connect_cause == "not a store"
    with pytest.raises(
        RendezvousConnectionError,
        match=r"^rank 1 \(join timeout 5 s\): something answered at 127\.0\.0\.1:29400 but it "
        r"is not a rendezvous store: the PING reply was b'HTTP/1\.1 400 Bad Request\\r\\n"
        r"\\r\\n' instead of the nonce \d+: gave up after .*another "
        r"service, or a stalled store, holds that port\.$",
    ):
        raise connect_error(round_cfg(1), info.value, 0.05)


def test_the_rendezvous_error_names_the_endpoint_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RendezvousConnectionError) as info:
        _advice(monkeypatch, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    message = str(info.value)
    assert message.startswith(
        "rank 1 (join timeout 5 s): no rendezvous store answered at 127.0.0.1:29400: gave up after "
    )
    assert message.count("127.0.0.1:29400") == 1
