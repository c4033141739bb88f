"""A member whose claim the store never answered: the host names it missing though it
connected, and how it ends is a race of its deadline with the host's.

The logs are rdzv's, as a drawn scenario (node 2 absent, node 1's first COMPARE_SET dropped,
a 2.6 s join) printed them in three runs: node 1 timed out on its own deadline, or the host
gave up a few milliseconds first and closed its connection, seen before or after node 1's
own deadline."""

from __future__ import annotations

import pytest
from test_from_log_errors import kinds, outcomes, scenario

from harness.logs.causes import outcome_of_message

_AT = "127.0.0.1:5"
_WHERE = f"round 0 of run 'r' at {_AT}"
_EOF = (
    f"the store at {_AT} closed the connection (EOF) during COMPARE_SET: the store host shut "
    "down or exited, gave up on this client, or rejected a request"
)
#: Node 1's failure in each of the three runs: (error class, message).
ENDINGS = {
    "its own deadline": (
        "rdzv.errors.RendezvousTimeoutError",
        (
            f"the rendezvous store at {_AT} did not answer in time while calling compare_set in "
            f"{_WHERE}, after 2.6 s: no reply to COMPARE_SET from the store at {_AT} within "
            "2569ms; the connection was closed"
        ),
    ),
    "the host's close first": (
        "rdzv.errors.RendezvousConnectionError",
        (
            f"lost the rendezvous store at {_AT} (hosted by rank 0) while calling compare_set in "
            f"{_WHERE}, after 2.6 s: {_EOF}"
        ),
    ),
    "the host's close, seen late": (
        "rdzv.errors.RendezvousTimeoutError",
        (
            f"rendezvous {_WHERE} timed out after 2.6 s: the store host closed the connection "
            "after this node's join deadline had passed (it gave up on the round too), so which "
            f"ranks are missing could not be determined ({_EOF}). Check the other nodes' logs, or "
            "raise the join timeout (2.6 s)."
        ),
    ),
}


def _line(t: float, text: str, level: str = "INFO") -> str:
    return f"[2026-01-01 00:00:{t:06.3f}] rdzv.rendezvous: [{level}] {text}\n".replace(".", ",", 1)


def _start(t: float, rank: int) -> str:
    return _line(t, f"started pid={100 + rank} placement='process'") + _line(
        t,
        f"join_start run_id='r' round=0 rank={rank} endpoint='{_AT}' elapsed=0.0 "
        "world_size=3 join_timeout=2.6",
    )


def _ending(t: float, cls: str, message: str) -> str:
    return (
        _line(t, f"failed: {message}", "WARNING")
        + "Traceback (most recent call last):\n"
        + f"{cls}: {message}\n"
    )


def _host(missing: str) -> str:
    failed = (
        f"rendezvous {_WHERE} timed out when the join deadline of rank 0 passed (after 2.6 s "
        f"here): 1 of 3 nodes joined; missing ranks: {missing}. Start the missing nodes, check "
        "their logs, or raise the join timeout."
    )
    return (
        _start(0.0, 0)
        + _line(0.012, f"server_listening endpoint='{_AT}' addresses=['127.0.0.1']")
        + _line(0.012, f"connected endpoint='{_AT}' attempts=1 elapsed=0.0002")
        + _line(0.013, f"joined run_id='r' round=0 rank=0 endpoint='{_AT}' joined=1")
        + _ending(2.600, "rdzv.errors.RendezvousTimeoutError", failed)
    )


def _member(begin: float, cls: str, message: str, joined: bool = False) -> str:
    text = _start(begin, 1) + _line(
        begin + 0.03, f"connected endpoint='{_AT}' attempts=1 elapsed=0.03"
    )
    if joined:
        text += _line(begin + 0.031, f"joined run_id='r' round=0 rank=1 endpoint='{_AT}' joined=2")
    return text + _ending(2.606, cls, message)


@pytest.mark.parametrize("stopped", [None, 2.610])
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_member_named_missing_though_connected_had_its_claim_dropped(
    ending: str, stopped: float | None
) -> None:
    # ``stopped``: the host's log goes on past node 1's end (its store stopped at 2.61 s,
    # after its linger): the EOF node 1 met at 2.606 s is still the host's giving up
    host = _host("1-2")
    if stopped is not None:
        host += _line(stopped, f"shutdown run_id='r' round=1 rank=0 endpoint='{_AT}' others=2")
    data, conversion = scenario(
        ("node-0.log", host),
        ("node-1.log", _member(0.005, *ENDINGS[ending])),
        ("node-2.log", ""),
    )
    assert kinds(data) == ["absent", "store_op"], conversion.text
    assert data["fault"][0]["nodes"] == [2]
    dropped = data["fault"][1]
    assert (dropped["nodes"], dropped["op"], dropped["action"]) == ([1], "COMPARE_SET", "drop")
    # node 1 began with the host: which of them gives up first is a matter of milliseconds
    assert outcomes(data) == {0: "timeout", 1: ["timeout", "connection_error"], 2: "absent"}


def test_a_member_that_began_late_ends_as_its_log_says() -> None:
    # began 1 s after the host: the host's deadline passes first, every time
    cls, message = ENDINGS["the host's close first"]
    data, conversion = scenario(
        ("node-0.log", _host("1-2")),
        ("node-1.log", _member(1.0, cls, message)),
        ("node-2.log", ""),
    )
    assert kinds(data) == ["absent", "late_start", "store_op"], conversion.text
    assert outcomes(data)[1] == "connection_error"


def test_a_member_that_joined_and_was_not_named_missing_is_given_no_store_fault() -> None:
    # node 1's claim landed (the host names only rank 2): it waited for the verdict
    message = (
        f"rendezvous {_WHERE} timed out when the join deadline of rank 0 passed (after 2.6 s "
        "here): 2 of 3 nodes joined; missing ranks: 2."
    )
    data, conversion = scenario(
        ("node-0.log", _host("2")),
        ("node-1.log", _member(0.005, "rdzv.errors.RendezvousTimeoutError", message, True)),
        ("node-2.log", ""),
    )
    assert kinds(data) == ["absent"], conversion.text
    assert outcomes(data) == {0: "timeout", 1: "timeout", 2: "absent"}


def test_a_store_that_did_not_answer_in_time_is_a_timeout() -> None:
    assert outcome_of_message(ENDINGS["its own deadline"][1]) == "timeout"


def test_a_request_unanswered_on_several_nodes_is_dropped_once_for_each() -> None:
    # a store_op rule's count is over all its nodes: one request each needs a count of two
    # (with the default of one, only the first node to send it was held in the replay)
    host = _host("1-2")
    cls, message = ENDINGS["its own deadline"]
    second = _member(0.004, cls, message).replace("rank=1", "rank=2").replace("=101", "=102")
    data, conversion = scenario(
        ("node-0.log", host), ("node-1.log", _member(0.005, cls, message)), ("node-2.log", second)
    )
    (dropped,) = [f for f in data["fault"] if f["kind"] == "store_op"]
    assert (dropped["nodes"], dropped["count"]) == ([1, 2], 2), conversion.text
    alone, _ = scenario(("node-0.log", host), ("node-1.log", _member(0.005, cls, message)))
    (one,) = [f for f in alone["fault"] if f["kind"] == "store_op"]
    assert one["nodes"] == [1] and "count" not in one  # one node: the default, one request


def _completed_host() -> str:
    return (
        _start(0.0, 0)
        + _line(0.003, f"server_listening endpoint='{_AT}' addresses=['127.0.0.1']")
        + _line(0.004, f"joined run_id='r' round=0 rank=0 endpoint='{_AT}' joined=1")
        + _line(0.005, f"complete run_id='r' round=0 rank=0 endpoint='{_AT}' world_size=3")
        + _line(0.005, "returned rank=0")
        + _line(3.172, f"shutdown run_id='r' round=1 rank=0 endpoint='{_AT}' others=2")
    )


def _verdict_never_came(late_reads: int) -> str:
    text = (
        _start(0.003, 1)
        + _line(0.004, f"connected endpoint='{_AT}' attempts=1 elapsed=0.001")
        + _line(0.005, f"joined run_id='r' round=0 rank=1 endpoint='{_AT}' joined=2")
    )
    for _ in range(late_reads):
        text += _line(
            3.173,
            f"verdict_read_late run_id='r' round=0 rank=1 endpoint='{_AT}' past_deadline=0.4 "
            f"fresh=True found=False error='StoreClosedError: the store at {_AT} closed the "
            "connection (EOF) during GET'",
        )
    message = (
        f"rendezvous {_WHERE} timed out after 2.5 s: which ranks are missing could not be "
        "determined (the store could not be asked)."
    )
    return text + _ending(3.173, "rdzv.errors.RendezvousTimeoutError", message)


def test_a_member_that_never_read_the_verdict_of_a_completed_round_had_its_wait_dropped() -> None:
    for late_reads, count in ((0, None), (1, 2)):
        data, conversion = scenario(
            ("node-0.log", _completed_host()),
            ("node-1.log", _verdict_never_came(late_reads)),
            ("node-2.log", _completed_host().replace("rank=0", "rank=2").replace("=100", "=102")),
        )
        (dropped,) = [f for f in data["fault"] if f["kind"] == "store_op"]
        assert (dropped["nodes"], dropped["op"], dropped["action"]) == ([1], "WAIT", "drop")
        assert dropped.get("count") == count, conversion.text  # and each late read's
        assert outcomes(data) == {0: "ok", 1: "timeout", 2: "ok"}


def test_a_reset_the_host_failed_on_is_still_the_members_own() -> None:
    # node 1's ADD was reset; it published its loss and the host failed on it, 1 ms before
    # node 1's own line: the host did not give up on its own, the reset is node 1's fault
    reset = f"connection reset by peer at {_AT} during ADD"
    host = _start(0.0, 0) + _line(
        0.012, f"server_listening endpoint='{_AT}' addresses=['127.0.0.1']"
    )
    host += _ending(
        0.020,
        "rdzv.errors.RendezvousConnectionError",
        f"rendezvous {_WHERE} failed: rank 1 (vm pid 101) lost its connection to the "
        f"rendezvous store while calling add: {reset}",
    )
    host += _line(0.030, f"shutdown run_id='r' round=1 rank=0 endpoint='{_AT}' others=1")
    member = _start(0.001, 1) + _line(0.005, f"connected endpoint='{_AT}' attempts=1")
    member += _ending(
        0.021,
        "rdzv.errors.RendezvousConnectionError",
        f"lost the rendezvous store at {_AT} (hosted by rank 0) while calling add in {_WHERE}, "
        f"after 0.0 s: {reset}",
    )
    data, conversion = scenario(("node-0.log", host), ("node-1.log", member))
    (failed,) = [f for f in data["fault"] if f["kind"] == "store_op"]
    assert (failed["nodes"], failed["op"], failed["action"]) == ([1], "ADD", "fail"), (
        conversion.text
    )
