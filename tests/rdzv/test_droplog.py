"""``rdzv.store.server._droplog.DropLog``: which lines the store server logs for dropped
connections.

Sans-IO: every test drives it with a made-up clock.
"""

from __future__ import annotations

import re

import pytest

from rdzv.store.server._droplog import MAX_PEERS, DropLog


def _drop(
    log: DropLog, now: float, n: int = 1, host: str = "10.0.0.1", reason: str = "junk"
) -> list[str | None]:
    return [
        log.record(now, f"{host}:{5000 + i}", host, reason, f"sent junk #{i}") for i in range(n)
    ]


def test_the_first_drops_of_a_burst_get_a_line_each_and_the_rest_one_summary_per_interval() -> None:
    log = DropLog(full_lines=3, interval=10.0)
    lines = _drop(log, 0.0, 3)
    assert lines == [
        "dropping store connection from 10.0.0.1:5000: sent junk #0",
        "dropping store connection from 10.0.0.1:5001: sent junk #1",
        (
            "dropping store connection from 10.0.0.1:5002: sent junk #2"
            " (further drops are summarised every 10 s)"
        ),
    ]
    assert log.summary_due is None
    assert _drop(log, 1.0, 500) == [None] * 500
    assert log.summary_due == 11.0
    assert log.summary(11.0) == (
        "dropped 500 more store connections in the last 10 s (not logged one by one): "
        "500 junk; from 1 peer"
    )
    assert log.summary_due is None
    assert log.summary(12.0) is None


def test_a_burst_that_goes_on_stays_summarised_and_a_quiet_interval_ends_it() -> None:
    log = DropLog(full_lines=2, interval=10.0)
    _drop(log, 0.0, 2)
    for second in range(1, 30):  # one drop a second: the burst never ends
        assert _drop(log, float(second)) == [None]
    log.summary(30.0)
    assert _drop(log, 38.0) == [None]  # 9 s after the last drop: still the same burst
    log.summary(48.0)
    line = _drop(log, 58.0)[0]  # 20 s of quiet: a new burst, logged in full again
    assert line is not None and line.startswith("dropping store connection from")


def test_a_summary_counts_reasons_most_frequent_first_and_distinct_peer_hosts() -> None:
    log = DropLog(full_lines=0, interval=10.0)
    _drop(log, 0.0, 2, host="10.0.0.1", reason="request left incomplete")
    _drop(log, 1.0, 5, host="10.0.0.2", reason="undecodable request")
    _drop(log, 2.0, 1, host="::1", reason="undecodable request")
    assert log.summary(4.5) == (
        "dropped 8 more store connections in the last 4 s (not logged one by one): "
        "6 undecodable request, 2 request left incomplete; from 3 peers"
    )
    _drop(log, 5.0)
    summary = log.summary(6.0)
    assert summary is not None
    assert re.match(r"dropped 1 more store connection in the last 1 s .*; from 1 peer$", summary)


def test_peer_hosts_beyond_the_cap_are_counted_as_more_than_the_cap() -> None:
    log = DropLog(full_lines=0, interval=10.0)
    for i in range(MAX_PEERS + 100):
        log.record(0.0, f"h{i}:1", f"h{i}", "junk", "sent junk")
    summary = log.summary(10.0)
    assert summary is not None
    assert summary.endswith(f"; from more than {MAX_PEERS} peers")
    assert summary.startswith(f"dropped {MAX_PEERS + 100} more store connections")


def test_close_logs_the_pending_summary_and_the_total_when_drops_were_summarised() -> None:
    log = DropLog(full_lines=1, interval=10.0)
    _drop(log, 0.0, 1, reason="undecodable request")
    _drop(log, 1.0, 3, reason="request left incomplete")
    assert log.close(3.0) == [
        (
            "dropped 3 more store connections in the last 2 s (not logged one by one): "
            "3 request left incomplete; from 1 peer"
        ),
        (
            "dropped 4 store connections in all while serving (1 logged one by one, "
            "3 summarised): 3 request left incomplete, 1 undecodable request"
        ),
    ]


def test_close_adds_nothing_when_every_drop_had_a_line_of_its_own() -> None:
    log = DropLog(full_lines=5, interval=10.0)
    _drop(log, 0.0, 4)
    assert log.close(1.0) == []
    assert DropLog().close(0.0) == []


@pytest.mark.parametrize(("full_lines", "interval"), [(-1, 10.0), (5, 0.0), (5, float("nan"))])
def test_a_drop_log_needs_a_non_negative_line_budget_and_a_positive_interval(
    full_lines: int, interval: float
) -> None:
    with pytest.raises(ValueError, match="full_lines must be >= 0 and interval > 0, got"):
        DropLog(full_lines=full_lines, interval=interval)
