"""Pure store semantics (``rdzv.store.state._kv``): torch's server behaviour plus rdzv's
pipelining."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdzv.store.state._kv import KV, MAX_HELD, PROBE_KEY
from rdzv.store.state._table import stoll
from rdzv.store.wire import _wire as w

STOP = b"\x00"
CANCELED = b"\x01"


def opened(*conns: str) -> KV:
    kv = KV()
    for conn in conns:
        kv.open(conn)
        assert kv.feed(conn, [w.Validate()], 0.0).replies == []
    return kv


def replies(kv: KV, conn: str, *reqs: w.Request) -> dict[object, bytes]:
    outcome = kv.feed(conn, reqs, 1.0)
    assert outcome.dropped == {}
    return dict(outcome.replies)


@pytest.mark.parametrize(
    ("stored", "expected", "desired", "result", "after"),
    [
        (None, b"", b"new", b"new", b"new"),  # missing + empty expected: created
        (None, b"old", b"new", b"old", None),  # missing + non-empty expected: not created
        (b"v", b"v", b"new", b"new", b"new"),  # equal: swapped
        (b"v", b"x", b"new", b"v", b"v"),  # different: unchanged, current returned
        (b"v", b"", b"new", b"v", b"v"),  # empty expected vs non-empty current
        (b"", b"", b"new", b"new", b"new"),  # empty value, empty expected: swapped
    ],
)
def test_compare_set_matches_torch_in_every_case(
    stored: bytes | None, expected: bytes, desired: bytes, result: bytes, after: bytes | None
) -> None:
    kv = KV()
    if stored is not None:
        kv.set(b"k", stored)
    assert kv.compare_set(b"k", expected, desired) == result
    assert kv.data.get(b"k") == after


@pytest.mark.parametrize(
    ("text", "number"),
    [(b"5", 5), (b"  -12", -12), (b"+7", 7), (b"42abc", 42), (b"\t3\n", 3), (b"0", 0)],
)
def test_add_parses_existing_values_like_std_stoll(text: bytes, number: int) -> None:
    kv = KV()
    kv.set(b"n", text)
    assert kv.add(b"n", 1) == number + 1
    assert kv.data[b"n"] == str(number + 1).encode()


@pytest.mark.parametrize("text", [b"", b"abc", b"-", b" + 1", b"99999999999999999999"])
def test_add_on_a_value_stoll_rejects_is_an_error(text: bytes) -> None:
    with pytest.raises(ValueError, match=r"integer|range"):
        stoll(text)


def test_add_that_overflows_i64_is_an_error() -> None:
    kv = KV()
    kv.add(b"n", 2**63 - 1)
    with pytest.raises(ValueError, match="overflows"):
        kv.add(b"n", 1)


@pytest.mark.parametrize(
    "write",
    [
        w.Set(b"k", b"v"),
        w.Add(b"k", 1),
        w.Append(b"k", b"v"),
        w.MultiSet(((b"other", b"1"), (b"k", b"v"))),
        w.CompareSet(b"k", b"", b"v"),
        w.QueuePush(b"k", b"v"),
        w.Barrier(b"k", 1),
    ],
    ids=lambda r: type(r).__name__,
)
def test_every_write_path_wakes_a_waiter(write: w.Request) -> None:
    kv = opened("waiter", "writer")
    assert replies(kv, "waiter", w.Wait((b"k",))) == {}
    out = replies(kv, "writer", write)
    assert out["waiter"] == STOP


def test_delete_and_a_failed_compare_set_wake_nobody() -> None:
    kv = opened("waiter", "writer")
    replies(kv, "waiter", w.Wait((b"k",)))
    assert "waiter" not in replies(kv, "writer", w.DeleteKey(b"k"))
    assert "waiter" not in replies(kv, "writer", w.CompareSet(b"k", b"expected", b"v"))


def test_a_multi_key_wait_ends_only_when_every_key_exists() -> None:
    kv = opened("waiter", "writer")
    replies(kv, "waiter", w.Wait((b"a", b"b", b"a")))
    assert "waiter" not in replies(kv, "writer", w.Set(b"b", b"1"))
    assert replies(kv, "writer", w.Set(b"a", b"1"))["waiter"] == STOP


def test_a_queue_push_wakes_only_one_waiter() -> None:
    kv = opened("w1", "w2", "pusher")
    replies(kv, "w1", w.Wait((b"q",)))
    replies(kv, "w2", w.Wait((b"q",)))
    out = replies(kv, "pusher", w.QueuePush(b"q", b"v"))
    assert out == {"w1": STOP}
    assert replies(kv, "pusher", w.QueuePush(b"q", b"v2")) == {"w2": STOP}


def test_num_keys_counts_map_keys_but_not_queues_and_check_sees_non_empty_queues() -> None:
    kv = opened("c")
    replies(kv, "c", w.Set(b"a", b""), w.QueuePush(b"q", b"v"))
    assert replies(kv, "c", w.GetNumKeys())["c"] == w.encode_i64(1)
    assert replies(kv, "c", w.Check((b"q",)))["c"] == b"\x00"
    assert replies(kv, "c", w.QueuePop(b"q"))["c"] == w.encode_i64(1) + w.encode_bytes(b"v")
    assert replies(kv, "c", w.Check((b"q",)))["c"] == b"\x01"
    assert replies(kv, "c", w.QueuePop(b"q"))["c"] == w.encode_i64(0)


def test_delete_key_answers_whether_the_key_existed() -> None:
    kv = opened("c")
    replies(kv, "c", w.Set(b"a", b"1"))
    assert replies(kv, "c", w.DeleteKey(b"a"))["c"] == w.encode_i64(1)
    assert replies(kv, "c", w.DeleteKey(b"a"))["c"] == w.encode_i64(0)


def test_get_of_a_missing_key_answers_empty_bytes_like_the_libuv_server() -> None:
    kv = opened("c")
    assert replies(kv, "c", w.Get(b"nope"))["c"] == w.encode_bytes(b"")


def test_list_keys_lists_raw_map_keys() -> None:
    kv = opened("c")
    replies(kv, "c", w.Set(b"/a", b"1"), w.Add(b"init/", 1))
    expected = w.encode_i64(2) + w.encode_bytes(b"/a") + w.encode_bytes(b"init/")
    assert replies(kv, "c", w.ListKeys())["c"] == expected


def test_requests_pipelined_behind_a_wait_run_when_the_wait_ends() -> None:
    kv = opened("reader", "writer")
    assert replies(kv, "reader", w.Wait((b"k",)), w.Get(b"k")) == {}
    out = replies(kv, "writer", w.Set(b"k", b"value"))
    assert out["reader"] == STOP + w.encode_bytes(b"value")


def test_cancel_wait_discards_requests_held_behind_the_wait() -> None:
    kv = opened("reader", "writer")
    replies(kv, "reader", w.Wait((b"k",)), w.Get(b"k"))
    assert replies(kv, "reader", w.CancelWait()) == {"reader": CANCELED}
    assert replies(kv, "writer", w.Set(b"k", b"v")) == {}
    assert kv.waiting() == {}


def test_cancel_wait_without_a_pending_wait_still_answers_canceled() -> None:
    kv = opened("c")
    assert replies(kv, "c", w.CancelWait()) == {"c": CANCELED}


def test_a_wait_that_ended_before_cancel_arrives_answers_stop_then_reply_then_canceled() -> None:
    kv = opened("reader", "writer")
    replies(kv, "reader", w.Wait((b"k",)), w.Get(b"k"))
    replies(kv, "writer", w.Set(b"k", b"v"))
    assert replies(kv, "reader", w.CancelWait()) == {"reader": CANCELED}


def test_the_probe_key_marks_rdzv_clients_which_alone_get_shutdown_notices() -> None:
    kv = opened("rdzv", "torch")
    assert replies(kv, "rdzv", w.Check((PROBE_KEY,))) == {"rdzv": b"\x00"}
    assert replies(
        kv,
        "torch",
        w.Check(
            (PROBE_KEY,),
        ),
    ) == {"torch": b"\x00"}
    kv2 = opened("rdzv", "torch")
    replies(kv2, "rdzv", w.Check((PROBE_KEY,)))
    replies(kv2, "rdzv", w.Wait((b"k",)))
    replies(kv2, "torch", w.Wait((b"k",)))
    assert kv2.shutdown_notices() == [("rdzv", CANCELED)]


def test_barrier_releases_everyone_when_the_count_reaches_world_size() -> None:
    kv = opened("a", "b", "c")
    assert replies(kv, "a", w.Barrier(b"bar", 3)) == {}
    assert replies(kv, "b", w.Barrier(b"bar", 3)) == {}
    assert replies(kv, "c", w.Barrier(b"bar", 3)) == {"c": STOP, "a": STOP, "b": STOP}
    assert kv.data[b"bar"] == b"3"


def test_the_first_request_must_be_validate() -> None:
    kv = KV()
    kv.open("c")
    outcome = kv.feed("c", [w.Set(b"k", b"v")], 0.0)
    assert "first request must be VALIDATE" in str(outcome.dropped["c"])
    assert kv.data == {}


def test_a_wrong_magic_is_a_protocol_error() -> None:
    kv = KV()
    kv.open("c")
    outcome = kv.feed("c", [w.Validate(0xDEADBEEF)], 0.0)
    assert "magic 0xdeadbeef" in str(outcome.dropped["c"])


def test_add_on_a_non_integer_drops_only_that_connection_and_waiters_hear_earlier_writes() -> None:
    kv = opened("waiter", "bad")
    replies(kv, "waiter", w.Wait((b"k",)))
    outcome = kv.feed("bad", [w.Set(b"k", b"text"), w.Add(b"k", 1)], 0.0)
    assert "not an integer" in str(outcome.dropped["bad"])
    assert dict(outcome.replies)["waiter"] == STOP
    assert kv.data[b"k"] == b"text"


def test_too_many_requests_held_behind_a_wait_is_a_protocol_error() -> None:
    kv = opened("c")
    outcome = kv.feed("c", [w.Wait((b"k",)), *[w.GetNumKeys()] * (MAX_HELD + 1)], 0.0)
    assert "pipelined behind a pending WAIT" in str(outcome.dropped["c"])


def test_closing_a_connection_forgets_its_waits() -> None:
    kv = opened("waiter", "writer")
    replies(kv, "waiter", w.Wait((b"k",)))
    kv.close("waiter")
    assert replies(kv, "writer", w.Set(b"k", b"v")) == {}
    assert kv.waiting() == {}


@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.binary(max_size=4)), max_size=20))
def test_waiting_reports_exactly_the_keys_still_missing(writes: list[tuple[bytes, bytes]]) -> None:
    kv = opened("waiter", "writer")
    replies(kv, "waiter", w.Wait((b"a", b"b", b"c")))
    for key, value in writes:
        replies(kv, "writer", w.Set(key, value))
    written = {k for k, _ in writes}
    pending = kv.waiting()
    if written >= {b"a", b"b", b"c"}:
        assert pending == {}
    else:
        assert sorted(pending["waiter"][0]) == sorted({b"a", b"b", b"c"} - written)
