"""One store conformance suite, run against every backend of ``store_factory``.

The expected behaviour is torch 2.13's TCPStore (reference §2.2, §4.4). Where a backend
legitimately differs it is encoded through :class:`Backend` attributes: HashStore keys carry
no ``/`` in messages, torch clients raise torch's error classes, in-memory stores have no
connection to drop, rdzv reports local misuse as ``ValueError``.
"""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest

from conftest import Backend, InThread

SHORT = timedelta(milliseconds=100)
#: How long a waiter must stay blocked before the releasing write (it can only pass falsely).
BLOCKED = 0.1
LONG = timedelta(seconds=20)


def _keys_pattern(backend: Backend, *keys: str) -> str:
    return r"timeout after \d+ms, keys: " + re.escape(", ".join(backend.shown(k) for k in keys))


def _assert_timeout_kind(backend: Backend, error: BaseException) -> None:
    assert isinstance(error, RuntimeError)
    if not backend.torch_client:
        assert isinstance(error, TimeoutError)


# --- set / get / check -------------------------------------------------------------------


def test_set_then_get_returns_the_value_as_bytes(backend: Backend) -> None:
    store = backend.store
    store.set("key", "value")
    store.set("bin", b"\x00\xff\x00")
    store.set("empty", "")
    store.set("ключ", "значение")
    assert store.get("key") == b"value"
    assert store.get("bin") == b"\x00\xff\x00"
    assert store.get("empty") == b""
    assert store.get("ключ") == "значение".encode()


def test_set_overwrites_the_previous_value(backend: Backend) -> None:
    backend.store.set("key", "first")
    backend.store.set("key", "second")
    assert backend.store.get("key") == b"second"


def test_check_is_true_only_when_every_key_exists(backend: Backend) -> None:
    store = backend.store
    store.set("here", "1")
    assert store.check(["here"])
    assert not store.check(["absent"])
    assert not store.check(["here", "absent"])
    assert store.check([])


def test_a_write_by_one_client_is_seen_by_another(backend: Backend) -> None:
    backend.other().set("shared", "from-other")
    assert backend.store.get("shared") == b"from-other"


# --- add ----------------------------------------------------------------------------------


def test_add_starts_a_missing_key_at_zero_and_stores_decimal_text(backend: Backend) -> None:
    store = backend.store
    assert store.add("counter", 1) == 1
    assert store.add("counter", 2) == 3
    assert store.add("counter", 3) == 6
    assert store.get("counter") == b"6"


def test_add_continues_from_a_decimal_value_that_was_set_as_text(backend: Backend) -> None:
    backend.store.set("n", "5")
    assert backend.store.add("n", 1) == 6


def test_add_accepts_negative_and_large_amounts(backend: Backend) -> None:
    store = backend.store
    assert store.add("n", -7) == -7
    assert store.get("n") == b"-7"
    assert store.add("big", 2**62) == 2**62
    assert store.add("big", -(2**62) * 2) == -(2**62)
    assert store.get("big") == str(-(2**62)).encode()


def test_add_with_zero_reads_the_counter_without_changing_it(backend: Backend) -> None:
    backend.store.add("n", 4)
    assert backend.store.add("n", 0) == 4
    assert backend.store.get("n") == b"4"


def test_add_of_an_amount_outside_64_bits_is_refused_locally_and_the_store_stays_usable(
    backend: Backend,
) -> None:
    store = backend.store
    with pytest.raises((TypeError, ValueError)):
        store.add("huge", 2**63)
    assert store.add("huge", 1) == 1


def test_add_on_a_value_that_is_not_an_integer(backend: Backend) -> None:
    """In memory: a ValueError. Over TCP the server drops that connection (torch does too);
    a fresh connection still sees the data."""
    store = backend.store
    store.set("word", "abc")
    if backend.dropped_error is None:
        with pytest.raises(ValueError, match="not an integer"):
            store.add("word", 1)
        assert store.get("word") == b"abc"
        assert store.add("n", 1) == 1
        return
    match = "closed" if backend.torch_client else "not an integer"
    with pytest.raises(backend.dropped_error, match=match):
        store.add("word", 1)
    with pytest.raises(backend.dropped_error):
        store.check(["word"])
    fresh = backend.fresh_raw()
    assert fresh.get(backend.full("word")) == b"abc"
    assert fresh.add(backend.full("n"), 1) == 1


# --- compare_set --------------------------------------------------------------------------

# (stored before or None, expected, desired, returned, stored after or None)
_CAS_CASES = [
    pytest.param(None, "", "new", b"new", b"new", id="missing-empty-expected-creates"),
    pytest.param(None, "old", "new", b"old", None, id="missing-other-expected-returns-it"),
    pytest.param("cur", "cur", "new", b"new", b"new", id="equal-replaces"),
    pytest.param("cur", "other", "new", b"cur", b"cur", id="different-keeps-current"),
    pytest.param("cur", "", "new", b"cur", b"cur", id="empty-expected-keeps-current"),
    pytest.param("", "", "new", b"new", b"new", id="empty-value-empty-expected-replaces"),
]


@pytest.mark.parametrize(("before", "expected", "desired", "returned", "after"), _CAS_CASES)
def test_compare_set_follows_torch_in_every_case(
    backend: Backend,
    before: str | None,
    expected: str,
    desired: str,
    returned: bytes,
    after: bytes | None,
) -> None:
    store = backend.store
    if before is not None:
        store.set("slot", before)
    assert store.compare_set("slot", expected, desired) == returned
    if after is None:
        assert not store.check(["slot"])
    else:
        assert store.get("slot") == after


def test_compare_set_that_creates_a_key_wakes_a_waiter(backend: Backend) -> None:
    waiter = InThread(backend.store.wait, ["slot"], LONG)
    assert not waiter.done.wait(BLOCKED), "wait returned before the key existed"
    assert backend.other().compare_set("slot", "", "v") == b"v"
    waiter.outcome()


# --- wait and timeouts ----------------------------------------------------------------------


def test_wait_for_a_missing_key_times_out_naming_the_key(backend: Backend) -> None:
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "missing")) as info:
        backend.store.wait(["missing"], SHORT)
    _assert_timeout_kind(backend, info.value)


def test_a_wait_timeout_names_every_awaited_key(backend: Backend) -> None:
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "a", "b")):
        backend.store.wait(["a", "b"], SHORT)


def test_wait_with_a_zero_timeout_fails_at_once_for_a_missing_key(backend: Backend) -> None:
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "missing")):
        backend.store.wait(["missing"], timedelta(0))


def test_wait_for_no_keys_or_existing_keys_returns(backend: Backend) -> None:
    store = backend.store
    store.wait([], SHORT)
    store.set("a", "1")
    store.add("b", 1)
    store.wait(["a", "b"], SHORT)
    store.wait(["a"])


def test_get_of_a_missing_key_times_out_after_the_store_timeout(backend: Backend) -> None:
    backend.store.set_timeout(SHORT)
    pattern = _keys_pattern(backend, "nonexistent key")
    with pytest.raises(backend.timeout_error, match=pattern) as info:
        backend.store.get("nonexistent key")
    _assert_timeout_kind(backend, info.value)


def test_a_connection_stays_usable_after_timeouts_and_replies_stay_in_step(
    backend: Backend,
) -> None:
    store = backend.store
    store.set("x", "1")
    base = store.num_keys()
    with pytest.raises(backend.timeout_error):
        store.wait(["late"], SHORT)
    store.set_timeout(SHORT)
    with pytest.raises(backend.timeout_error):
        store.get("late")
    with pytest.raises(backend.timeout_error):
        store.multi_get(["x", "late"])
    # The key arrives after the deadlines: nothing stale may leak into later replies.
    backend.other().set("late", "arrived")
    assert store.get("x") == b"1"
    assert store.add("n", 5) == 5
    assert not store.check(["never"])
    assert store.compare_set("x", "1", "2") == b"2"
    assert store.get("late") == b"arrived"
    assert store.check(["late"])
    assert store.num_keys() == base + 2
    assert store.multi_get(["x", "late", "n"]) == [b"2", b"arrived", b"5"]


def test_a_deleted_key_is_waited_for_again(backend: Backend) -> None:
    store = backend.store
    store.set("gone", "1")
    assert store.delete_key("gone")
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "gone")):
        store.wait(["gone"], SHORT)


def test_a_multi_key_wait_is_released_only_when_another_client_set_every_key(
    backend: Backend,
) -> None:
    waiter = InThread(backend.store.wait, ["a", "b"], LONG)
    setter = backend.other()
    setter.set("a", "1")
    assert not waiter.done.wait(BLOCKED), "wait returned although 'b' was never set"
    setter.set("b", "2")
    waiter.outcome()


def test_duplicate_keys_in_one_wait_are_released_by_one_set(backend: Backend) -> None:
    waiter = InThread(backend.store.wait, ["dup", "dup"], LONG)
    assert not waiter.done.wait(BLOCKED), "wait returned before the key existed"
    backend.other().set("dup", "1")
    waiter.outcome()


def test_a_blocking_get_is_released_by_another_connections_set(backend: Backend) -> None:
    getter = InThread(backend.store.get, "later")
    assert not getter.done.wait(BLOCKED), "get returned before the key existed"
    backend.other().set("later", "value")
    assert getter.outcome() == b"value"


def test_append_wakes_a_waiter(backend: Backend) -> None:
    waiter = InThread(backend.store.get, "log")
    assert not waiter.done.wait(BLOCKED), "get returned before the key existed"
    backend.other().append("log", "line")
    assert waiter.outcome() == b"line"


# --- delete / num_keys / list_keys ----------------------------------------------------------


def test_delete_key_reports_whether_the_key_existed(backend: Backend) -> None:
    store = backend.store
    store.set("k", "v")
    assert store.delete_key("k") is True
    assert store.delete_key("k") is False
    assert store.delete_key("never") is False
    assert not store.check(["k"])


def test_num_keys_counts_every_key_relative_to_the_baseline(backend: Backend) -> None:
    store = backend.store
    base = store.num_keys()
    store.set("a", "1")
    store.set("b", "2")
    store.add("c", 1)
    store.append("d", "x")
    assert store.num_keys() == base + 4
    store.set("a", "again")
    assert store.num_keys() == base + 4
    assert store.delete_key("b")
    assert store.num_keys() == base + 3
    store.set("-key3", "v")
    assert store.delete_key("-key3")
    assert store.num_keys() == base + 3


def test_num_keys_counts_internal_keys_that_list_keys_hides(backend: Backend) -> None:
    raw = backend.raw
    assert raw.list_keys() == []
    assert raw.num_keys() == backend.internal_keys
    raw.set("a", "1")
    raw.add("b", 2)
    assert sorted(raw.list_keys()) == ["a", "b"]
    assert raw.num_keys() == backend.internal_keys + 2


def test_queues_are_not_counted_as_keys(backend: Backend) -> None:
    store = backend.store
    base = store.num_keys()
    store.queue_push("q", "v")
    assert store.num_keys() == base
    assert backend.full("q") not in backend.raw.list_keys()


def test_list_keys_returns_the_user_keys(backend: Backend) -> None:
    store = backend.store
    before = set(store.list_keys())
    store.set("k1", "v")
    store.add("k2", 1)
    store.multi_set(["k3", "k4"], ["a", "b"])
    assert set(store.list_keys()) == before | {"k1", "k2", "k3", "k4"}
    store.delete_key("k1")
    assert set(store.list_keys()) == before | {"k2", "k3", "k4"}


# --- multi_get / multi_set / append ---------------------------------------------------------


def test_multi_set_then_multi_get_round_trips_in_order(backend: Backend) -> None:
    store = backend.store
    store.multi_set(["foo", "bar"], ["po", b"tato"])
    assert store.multi_get(["foo", "bar"]) == [b"po", b"tato"]
    assert store.multi_get(["bar", "foo", "bar"]) == [b"tato", b"po", b"tato"]
    assert store.get("bar") == b"tato"


def test_multi_get_of_no_keys_returns_an_empty_list(backend: Backend) -> None:
    assert backend.store.multi_get([]) == []


def test_multi_get_waits_for_every_key_and_names_them_all_on_timeout(backend: Backend) -> None:
    store = backend.store
    store.set("have", "1")
    store.set_timeout(SHORT)
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "have", "lack")):
        store.multi_get(["have", "lack"])


def test_multi_get_is_released_when_the_last_key_arrives(backend: Backend) -> None:
    backend.store.set("one", "1")
    getter = InThread(backend.store.multi_get, ["one", "two"])
    assert not getter.done.wait(BLOCKED), "multi_get returned before 'two' existed"
    backend.other().set("two", "2")
    assert getter.outcome() == [b"1", b"2"]


def test_multi_set_with_mismatched_lengths_is_refused(backend: Backend) -> None:
    with pytest.raises(backend.misuse_error, match="same size"):
        backend.store.multi_set(["a", "b"], ["only-one"])
    assert not backend.store.check(["a"])


def test_append_creates_and_extends_values(backend: Backend) -> None:
    store = backend.store
    store.set("foo", "po")
    store.append("foo", "tato")
    store.append("bar", "po")
    store.append("bar", b"tato")
    assert store.get("foo") == b"potato"
    assert store.get("bar") == b"potato"


def test_appends_can_build_a_value_larger_than_one_request_may_carry(backend: Backend) -> None:
    """Each append carries 5 MiB (under the 8 MiB request cap); the value grows to 10 MiB,
    which torch's client reads back whole."""
    store = backend.store
    store.append("big", b"a" * 5 * 2**20)
    store.append("big", b"b" * 5 * 2**20)
    value = store.get("big")
    assert len(value) == 10 * 2**20
    assert value[:1] == b"a"
    assert value[-1:] == b"b"


# --- queues --------------------------------------------------------------------------------


def test_queue_push_pop_and_len_are_first_in_first_out(backend: Backend) -> None:
    store = backend.store
    assert not store.check(["foo"])
    assert store.queue_len("foo") == 0
    store.queue_push("foo", "1")
    store.queue_push("foo", b"2")
    assert store.check(["foo"])
    assert store.queue_len("foo") == 2
    store.wait(["foo"], SHORT)
    assert store.queue_pop("foo") == b"1"
    assert store.queue_pop("foo") == b"2"
    assert not store.check(["foo"])
    assert store.queue_len("foo") == 0


def test_a_non_blocking_pop_on_an_empty_queue_raises_queue_empty(backend: Backend) -> None:
    store = backend.store
    with pytest.raises(backend.queue_empty_error, match="empty"):
        store.queue_pop("foo", block=False)
    store.queue_push("foo", b"a")
    assert store.queue_pop("foo", block=False) == b"a"


def test_a_blocking_pop_on_an_empty_queue_times_out_and_the_store_stays_usable(
    backend: Backend,
) -> None:
    store = backend.store
    store.set_timeout(SHORT)
    with pytest.raises(backend.timeout_error, match=_keys_pattern(backend, "q")) as info:
        store.queue_pop("q")
    _assert_timeout_kind(backend, info.value)
    store.queue_push("q", "v")
    assert store.queue_pop("q") == b"v"


def test_a_blocking_pop_is_released_by_another_clients_push(backend: Backend) -> None:
    popper = InThread(backend.store.queue_pop, "jobs")
    assert not popper.done.wait(BLOCKED), "pop returned from an empty queue"
    backend.other().queue_push("jobs", "job-1")
    assert popper.outcome() == b"job-1"


def test_two_blocked_pops_each_receive_one_pushed_item(backend: Backend) -> None:
    released = threading.Event()
    first = InThread(backend.store.queue_pop, "jobs", notify=released)
    second = InThread(backend.other().queue_pop, "jobs", notify=released)
    pusher = backend.other()
    assert not released.wait(BLOCKED), "pop returned from an empty queue"
    pusher.queue_push("jobs", "job-1")
    assert released.wait(10), "a push released nobody"
    pending = [t for t in (first, second) if not t.done.is_set()]
    assert len(pending) == 1, "one pushed item released both pops"
    assert not pending[0].done.wait(BLOCKED), "one pushed item released both pops"
    pusher.queue_push("jobs", "job-2")
    assert sorted([first.outcome(), second.outcome()]) == [b"job-1", b"job-2"]
    assert backend.store.queue_len("jobs") == 0


# --- PrefixStore ----------------------------------------------------------------------------


def test_a_prefix_store_maps_every_operation_to_prefix_slash_key(backend: Backend) -> None:
    prefix = backend.prefix or "run9"
    view = backend.store if backend.prefix else backend.wrap(backend.store, prefix)
    raw = backend.raw
    view.set("a", "1")
    assert raw.get(f"{prefix}/a") == b"1"
    raw.set(f"{prefix}/b", "2")
    assert view.get("b") == b"2"
    assert view.add("n", 3) == 3
    assert raw.get(f"{prefix}/n") == b"3"
    view.append("log", "x")
    assert raw.get(f"{prefix}/log") == b"x"
    assert view.compare_set("a", "1", "one") == b"one"
    assert raw.get(f"{prefix}/a") == b"one"
    view.multi_set(["m1", "m2"], ["v1", "v2"])
    assert raw.multi_get([f"{prefix}/m1", f"{prefix}/m2"]) == [b"v1", b"v2"]
    view.queue_push("q", "item")
    assert raw.queue_len(f"{prefix}/q") == 1
    assert view.delete_key("b")
    assert not raw.check([f"{prefix}/b"])
    raw.set("outside", "x")
    assert not view.check(["outside"])
    assert sorted(view.list_keys()) == ["a", "log", "m1", "m2", "n"]
    assert view.num_keys() == raw.num_keys()


def test_a_nested_prefix_store_joins_the_prefixes_with_slashes(backend: Backend) -> None:
    prefix = backend.prefix or "run9"
    view = backend.store if backend.prefix else backend.wrap(backend.store, prefix)
    nested = backend.wrap(view, "inner")
    nested.set("c", "3")
    assert backend.raw.get(f"{prefix}/inner/c") == b"3"


def test_a_prefix_store_timeout_names_the_prefixed_key(backend: Backend) -> None:
    view = backend.wrap(backend.store, "pre")
    shown = backend.shown("pre/zz")
    with pytest.raises(backend.timeout_error, match=re.escape(f"keys: {shown}")):
        view.wait(["zz"], SHORT)


# --- set_timeout ----------------------------------------------------------------------------


def test_set_timeout_changes_the_default_of_later_blocking_calls(backend: Backend) -> None:
    store = backend.store
    store.set_timeout(SHORT)
    assert store.timeout == SHORT
    assert backend.raw.timeout == SHORT
    with pytest.raises(backend.timeout_error, match=r"after 100ms"):
        store.get("missing")
    store.set_timeout(LONG)
    assert store.timeout == LONG
    store.set("missing", "now")
    assert store.get("missing") == b"now"
