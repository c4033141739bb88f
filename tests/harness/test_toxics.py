"""Pure toxic logic: validation with Toxiproxy's rules, and each stage in virtual time."""

from __future__ import annotations

import itertools
import math
from random import Random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import AlreadyExistsError, InvalidRequestError
from harness.proxy.stages import End, make_stage, roll, slice_bounds
from harness.proxy.toxics import Toxic, new_toxic, toxic_json, updated_toxic


def toxic(kind: str, stream: str = "downstream", toxicity: float = 1.0, **attrs: int) -> Toxic:
    return new_toxic(
        {"type": kind, "stream": stream, "toxicity": toxicity, "attributes": attrs},
        existing_names=(),
    )


# ---------------------------------------------------------------- validation


def test_new_toxic_fills_toxiproxy_defaults_when_fields_are_omitted() -> None:
    made = new_toxic({"type": "latency"}, existing_names=())
    assert (made.name, made.stream, made.toxicity) == ("latency_downstream", "downstream", 1.0)
    assert dict(made.attributes) == {"latency": 0, "jitter": 0}


def test_new_toxic_reads_stream_case_insensitively_but_keeps_its_casing() -> None:
    made = new_toxic({"type": "noop", "stream": "UpStream"}, existing_names=())
    assert made.direction == "upstream"
    assert made.stream == "UpStream"
    assert made.name == "noop_UpStream"


@pytest.mark.parametrize("stream", ["", "sideways", "up"])
def test_new_toxic_rejects_a_stream_that_is_neither_direction(stream: str) -> None:
    with pytest.raises(InvalidRequestError, match="stream was invalid"):
        new_toxic({"type": "noop", "stream": stream}, existing_names=())


def test_new_toxic_rejects_an_unknown_or_missing_type() -> None:
    with pytest.raises(InvalidRequestError, match="invalid toxic type"):
        new_toxic({"type": "packet_loss"}, existing_names=())
    with pytest.raises(InvalidRequestError, match="invalid toxic type"):
        new_toxic({}, existing_names=())


def test_new_toxic_checks_the_stream_before_the_type_as_toxiproxy_does() -> None:
    with pytest.raises(InvalidRequestError, match="stream was invalid"):
        new_toxic({"type": "bogus", "stream": "bogus"}, existing_names=())


def test_new_toxic_refuses_a_name_already_used_on_the_proxy() -> None:
    with pytest.raises(AlreadyExistsError, match="toxic already exists"):
        new_toxic({"type": "latency"}, existing_names={"latency_downstream"})


def test_new_toxic_names_the_attribute_that_is_not_an_integer() -> None:
    body = {"type": "latency", "attributes": {"latency": "100"}}
    with pytest.raises(InvalidRequestError, match="attribute 'latency' of a latency toxic"):
        new_toxic(body, existing_names=())


def test_new_toxic_ignores_unknown_attributes_and_accepts_integral_floats() -> None:
    body = {"type": "latency", "attributes": {"latency": 100.0, "colour": "red"}}
    assert dict(new_toxic(body, existing_names=()).attributes) == {"latency": 100, "jitter": 0}


@pytest.mark.parametrize(
    "body",
    [[], "latency", 5, {"type": 5}, {"type": "noop", "toxicity": "high"}, {"name": []}],
)
def test_new_toxic_rejects_malformed_bodies_as_bad_requests(body: object) -> None:
    with pytest.raises(InvalidRequestError, match="bad request body"):
        new_toxic(body, existing_names=())


def test_updated_toxic_merges_attributes_and_ignores_name_type_and_stream() -> None:
    old = toxic("latency", latency=100, jitter=10)
    new = updated_toxic(old, {"attributes": {"jitter": 3}, "name": "x", "type": "timeout"})
    assert (new.name, new.type, new.stream) == (old.name, old.type, old.stream)
    assert dict(new.attributes) == {"latency": 100, "jitter": 3}
    assert updated_toxic(old, {"toxicity": 0.25}).toxicity == 0.25


def test_toxic_json_has_toxiproxys_shape() -> None:
    assert toxic_json(toxic("bandwidth", rate=10)) == {
        "attributes": {"rate": 10},
        "name": "bandwidth_downstream",
        "type": "bandwidth",
        "stream": "downstream",
        "toxicity": 1,
    }


def test_roll_applies_a_toxic_exactly_when_the_draw_is_below_toxicity() -> None:
    first_draw = Random(7).random()
    assert roll(first_draw + 1e-9, Random(7)) is True
    assert roll(first_draw, Random(7)) is False
    assert all(roll(1.0, Random(seed)) for seed in range(50))
    assert not any(roll(0.0, Random(seed)) for seed in range(50))


# ---------------------------------------------------------------- stages


def test_latency_holds_each_chunk_for_its_delay_after_arrival() -> None:
    stage = make_stage(toxic("latency", latency=100))
    ((due_a, item_a),) = stage.push(b"a", 1.0, Random(0)).out
    ((due_b, item_b),) = stage.push(b"b", 1.05, Random(0)).out
    assert (item_a, item_b) == (b"a", b"b")
    assert (due_a, due_b) == pytest.approx((1.1, 1.15))


def test_latency_jitter_stays_in_range_and_never_reorders() -> None:
    stage = make_stage(toxic("latency", latency=50, jitter=40))
    rng = Random(3)
    dues = [stage.push(b"x", i * 0.001, rng).out[0][0] for i in range(500)]
    assert dues == sorted(dues)
    assert all(due - i * 0.001 >= 0.010 - 1e-9 for i, due in enumerate(dues))
    assert max(due - i * 0.001 for i, due in enumerate(dues)) <= 0.090 + 1e-9


def test_latency_passes_the_end_after_the_data_it_holds() -> None:
    stage = make_stage(toxic("latency", latency=100))
    stage.push(b"a", 0.0, Random(0))
    assert stage.push(End("eof"), 0.01, Random(0)).out == ((0.1, End("eof")),)


def test_bandwidth_spreads_a_chunk_over_its_transfer_time_in_100ms_slices() -> None:
    stage = make_stage(toxic("bandwidth", rate=10))  # 10 KB/s: 1000-byte slices
    out = stage.push(b"x" * 2500, 0.0, Random(0)).out
    assert [len(item) for _, item in out if isinstance(item, bytes)] == [1000, 1000, 500]
    assert [due for due, _ in out] == pytest.approx([0.1, 0.2, 0.25])
    assert stage.push(b"y" * 100, 0.0, Random(0)).out[0][0] == pytest.approx(0.26)


def test_bandwidth_rate_zero_holds_data_indefinitely() -> None:
    stage = make_stage(toxic("bandwidth", rate=0))
    assert stage.push(b"abc", 0.0, Random(0)).out == ((math.inf, b"abc"),)


def test_slice_bounds_with_no_variation_cut_exact_average_sizes() -> None:
    assert slice_bounds(24, 1, 0, Random(0)) == list(range(25))
    assert slice_bounds(10, 4, 0, Random(0)) == [0, 4, 8, 10]


def test_slice_bounds_cover_the_chunk_with_pieces_within_bounds() -> None:
    rng = Random(11)
    bounds = slice_bounds(480_000, 1024, 512, rng)
    sizes = [b - a for a, b in itertools.pairwise(bounds)]
    assert bounds[0] == 0 and bounds[-1] == 480_000
    assert all(0 < size <= 1536 for size in sizes)
    assert 240 <= len(sizes) <= 720


def test_slice_bounds_terminate_with_a_zero_or_negative_average() -> None:
    assert slice_bounds(5, 0, -3, Random(0)) == [0, 1, 2, 3, 4, 5]


def test_slicer_spaces_pieces_by_its_delay_in_microseconds() -> None:
    stage = make_stage(toxic("slicer", average_size=2, size_variation=0, delay=1000))
    out = stage.push(b"abcdef", 1.0, Random(0)).out
    assert [item for _, item in out] == [b"ab", b"cd", b"ef"]
    assert [due for due, _ in out] == pytest.approx([1.0, 1.001, 1.002])


def test_slow_close_delays_only_the_end() -> None:
    stage = make_stage(toxic("slow_close", delay=300))
    assert stage.push(b"a", 1.0, Random(0)).out == ((1.0, b"a"),)
    assert stage.push(End("eof"), 2.0, Random(0)).out == ((2.3, End("eof")),)


def test_timeout_drops_data_and_closes_after_the_timeout_without_input() -> None:
    stage = make_stage(toxic("timeout", timeout=100))
    assert stage.start(0.0).deadline == pytest.approx(0.1)
    step = stage.push(b"dropped", 0.05, Random(0))
    assert step.out == () and step.deadline == pytest.approx(0.15)
    assert stage.expire(0.15).out == ((0.15, End("close", "timeout_downstream")),)
    assert stage.push(b"late", 0.2, Random(0)).out == ()


def test_timeout_zero_is_a_black_hole_with_no_deadline() -> None:
    stage = make_stage(toxic("timeout", timeout=0))
    assert stage.start(0.0).deadline is None
    assert stage.push(b"gone", 1.0, Random(0)) == (
        (),
        None,
        "dropping data",
    )


def test_reset_peer_resets_timeout_after_the_first_chunk_and_drops_the_rest() -> None:
    stage = make_stage(toxic("reset_peer", timeout=50))
    assert stage.push(b"a", 1.0, Random(0)).out == ((1.05, End("reset", "reset_peer_downstream")),)
    assert stage.push(b"b", 1.01, Random(0)).out == ()


def test_limit_data_truncates_the_chunk_crossing_the_limit_then_closes() -> None:
    stage = make_stage(toxic("limit_data", bytes=100))
    assert stage.push(b"x" * 90, 0.0, Random(0)).out == ((0.0, b"x" * 90),)
    out = stage.push(b"y" * 20, 0.0, Random(0)).out
    assert out == ((0.0, b"y" * 10), (0.0, End("close", "limit_data_downstream")))


def test_limit_data_keeps_its_count_across_an_update() -> None:
    first = make_stage(toxic("limit_data", bytes=100))
    first.push(b"x" * 90, 0.0, Random(0))
    again = make_stage(toxic("limit_data", bytes=100), previous=first)
    assert again.push(b"y" * 20, 0.0, Random(0)).out[0] == (0.0, b"y" * 10)


def test_limit_data_of_zero_closes_on_the_first_chunk_forwarding_nothing() -> None:
    stage = make_stage(toxic("limit_data", bytes=0))
    assert stage.push(b"abc", 0.0, Random(0)).out == ((0.0, End("close", "limit_data_downstream")),)


def test_limit_data_passes_a_chunk_exactly_at_the_limit_then_closes() -> None:
    stage = make_stage(toxic("limit_data", bytes=4))
    assert stage.push(b"abcd", 0.0, Random(0)).out == (
        (0.0, b"abcd"),
        (0.0, End("close", "limit_data_downstream")),
    )


def test_noop_passes_everything_unchanged() -> None:
    stage = make_stage(toxic("noop"))
    assert stage.push(b"abc", 2.0, Random(0)).out == ((2.0, b"abc"),)


# ---------------------------------------------------------------- invariants

_LOSSLESS = st.sampled_from(
    [
        ("noop", {}),
        ("latency", {"latency": 5, "jitter": 5}),
        ("latency", {"latency": 0, "jitter": 50}),
        ("bandwidth", {"rate": 1}),
        ("slicer", {"average_size": 3, "size_variation": 2, "delay": 10}),
        ("slow_close", {"delay": 7}),
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    chain=st.lists(_LOSSLESS, min_size=1, max_size=4),
    chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=12),
    gaps=st.lists(st.floats(0, 0.05), min_size=13, max_size=13),
    seed=st.integers(0, 2**32),
)
def test_a_chain_of_lossless_toxics_keeps_every_byte_in_order_with_rising_due_times(
    chain: list[tuple[str, dict[str, int]]],
    chunks: list[bytes],
    gaps: list[float],
    seed: int,
) -> None:
    rng = Random(seed)
    stages = [make_stage(toxic(kind, **attrs)) for kind, attrs in chain]
    items: list[tuple[float, bytes | End]] = []
    now = 0.0
    for chunk, gap in zip([*chunks, b""], gaps[: len(chunks) + 1], strict=True):
        now += gap
        items.append((now, chunk if chunk else End("eof")))
    for stage in stages:
        items = [emit for arrive, item in items for emit in stage.push(item, arrive, rng).out]
    dues = [due for due, _ in items]
    assert dues == sorted(dues)
    assert b"".join(item for _, item in items if isinstance(item, bytes)) == b"".join(chunks)
    assert items[-1][1] == End("eof")
