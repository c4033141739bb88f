"""A node that had connected and then lost its connection with the path: its attempts to
dial again were refused, so the path went down then (a ``link_down`` from that moment), not
a store request that failed.

The log is rdzv's, as a drawn scenario printed it (nodes 1 and 2 absent, node 3's link down
at 3.3 s of a 3.4 s join, while node 3 waited for the others)."""

from __future__ import annotations

from test_from_log_errors import kinds, outcomes, scenario

_AT = "127.0.0.1:5"
_WHERE = f"round 0 of run 'r' at {_AT}"


def _line(t: float, text: str, level: str = "INFO") -> str:
    return f"[2026-01-01 00:00:{t:06.3f}] rdzv.rendezvous: [{level}] {text}\n".replace(".", ",", 1)


def _start(rank: int) -> str:
    return _line(0.0, f"started pid={100 + rank} placement='process'") + _line(
        0.0,
        f"join_start run_id='r' round=0 rank={rank} endpoint='{_AT}' elapsed=0.0 "
        "world_size=4 join_timeout=3.4",
    )


def _host() -> str:
    failed = (
        f"rendezvous {_WHERE} timed out after 3.4 s: 2 of 4 nodes joined; missing ranks: 1-2. "
        "Start the missing nodes, check their logs, or raise the join timeout (3.4 s)."
    )
    return (
        _start(0)
        + _line(0.005, f"server_listening endpoint='{_AT}' addresses=['127.0.0.1']")
        + _line(0.005, f"connected endpoint='{_AT}' attempts=1 elapsed=0.0003")
        + _line(0.006, f"joined run_id='r' round=0 rank=0 endpoint='{_AT}' joined=1")
        + _line(3.304, "member_vanished run_id='r' round=0 rank=0 lost_rank=3 grace=2.0")
        + _line(3.401, f"failed: {failed}", "WARNING")
        + _line(6.806, f"shutdown run_id='r' round=1 rank=0 endpoint='{_AT}' others=3")
        + f"Traceback (most recent call last):\nrdzv.errors.RendezvousTimeoutError: {failed}\n"
    )


def _member(refused: tuple[float, ...], again: float | None = None) -> str:
    text = (
        _start(3)
        + _line(0.017, f"connected endpoint='{_AT}' attempts=1 elapsed=0.017")
        + _line(0.018, f"joined run_id='r' round=0 rank=3 endpoint='{_AT}' joined=2")
    )
    for n, t in enumerate(refused, 1):
        error = "ConnectionRefusedError: [Errno 111] Connection refused"
        text += _line(t, f"connect_attempt endpoint='{_AT}' attempt={n} error='{error}'")
    if again is not None:
        text += _line(again, f"connected endpoint='{_AT}' attempts={len(refused) + 1}")
    failed = (
        f"lost the rendezvous store at {_AT} (hosted by rank 0) while waiting for the other "
        f"nodes in {_WHERE}, after 3.3 s: the store at {_AT} closed the connection (EOF) "
        "during GET: the store host shut down or exited, gave up on this client, or rejected "
        "a request"
    )
    return (
        text
        + _line(3.400, f"failed: {failed}", "WARNING")
        + f"Traceback (most recent call last):\nrdzv.errors.RendezvousConnectionError: {failed}\n"
    )


def _logs(member: str) -> tuple[tuple[str, str], ...]:
    return (
        ("node-0.log", _host()),
        ("node-1.log", ""),
        ("node-2.log", ""),
        ("node-3.log", member),
    )


def test_refused_redials_after_connecting_are_a_link_down_from_the_first() -> None:
    data, conversion = scenario(*_logs(_member((3.304, 3.316, 3.335, 3.394))))
    assert kinds(data) == ["absent", "link_down"], conversion.text
    down = data["fault"][1]
    assert (down["nodes"], down["at"]) == ([3], 3.3)
    assert "duration" not in down  # it never connected again
    assert outcomes(data)[3] == "connection_error"


def test_a_link_down_after_connecting_ends_when_the_node_connected_again() -> None:
    data, conversion = scenario(*_logs(_member((3.104, 3.216, 3.335), again=3.36)))
    down = data["fault"][1]
    assert (down["kind"], down["at"], down["duration"]) == ("link_down", 3.1, 0.2), conversion.text


def test_a_lost_connection_without_a_failed_redial_is_still_the_stores_request() -> None:
    # the connection reset during GET, no attempt to dial again failed: the store's doing
    data, conversion = scenario(*_logs(_member(()).replace("(EOF)", "reset (ECONNRESET)")))
    assert kinds(data) == ["absent", "store_op"], conversion.text
    assert (data["fault"][1]["action"], data["fault"][1]["nodes"]) == ("fail", [3])
