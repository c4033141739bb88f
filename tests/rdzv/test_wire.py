"""The sans-IO TCPStore codec: whole, byte by byte, with trailing bytes, round trips, limits."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdzv.errors import StoreProtocolError
from rdzv.store.wire import _wire as w
from rdzv.store.wire._decoder import RequestDecoder

keys = st.binary(max_size=40)
values = st.binary(max_size=200)
key_tuples = st.lists(keys, max_size=6).map(tuple)
i64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
u32 = st.integers(min_value=0, max_value=2**32 - 1)

requests = st.one_of(
    st.builds(w.Validate, u32),
    st.builds(w.Set, keys, values),
    st.builds(w.CompareSet, keys, values, values),
    st.builds(w.Get, keys),
    st.builds(w.Add, keys, i64),
    st.builds(w.Check, key_tuples),
    st.builds(w.Wait, key_tuples),
    st.just(w.GetNumKeys()),
    st.builds(w.DeleteKey, keys),
    st.builds(w.Append, keys, values),
    st.builds(w.MultiGet, key_tuples),
    st.builds(w.MultiSet, st.lists(st.tuples(keys, values), max_size=5).map(tuple)),
    st.just(w.CancelWait()),
    st.builds(w.Ping, u32),
    st.builds(w.QueuePush, keys, values),
    st.builds(w.QueuePop, keys),
    st.builds(w.QueueLen, keys),
    st.just(w.ListKeys()),
    st.builds(w.Barrier, keys, i64),
)

#: One example of every request, with torch's exact bytes (little-endian, u64 lengths).
EXAMPLES = [
    (w.Validate(), b"\x00\xce\xf7\x85\x3c"),
    (w.Set(b"/k", b"v"), b"\x01" + struct.pack("<Q", 2) + b"/k" + struct.pack("<Q", 1) + b"v"),
    (
        w.CompareSet(b"k", b"", b"d"),
        b"\x02" + struct.pack("<Q", 1) + b"k" + struct.pack("<Q", 0) + struct.pack("<Q", 1) + b"d",
    ),
    (w.Get(b"k"), b"\x03" + struct.pack("<Q", 1) + b"k"),
    (w.Add(b"k", -7), b"\x04" + struct.pack("<Q", 1) + b"k" + struct.pack("<q", -7)),
    (
        w.Check((b"a", b"b")),
        b"\x05" + struct.pack("<QQ", 2, 1) + b"a" + struct.pack("<Q", 1) + b"b",
    ),
    (w.Wait((b"a",)), b"\x06" + struct.pack("<QQ", 1, 1) + b"a"),
    (w.GetNumKeys(), b"\x07"),
    (w.DeleteKey(b"k"), b"\x08" + struct.pack("<Q", 1) + b"k"),
    (w.Append(b"k", b"x"), b"\x09" + struct.pack("<Q", 1) + b"k" + struct.pack("<Q", 1) + b"x"),
    (w.MultiGet((b"a",)), b"\x0a" + struct.pack("<QQ", 1, 1) + b"a"),
    (
        w.MultiSet(((b"a", b"1"),)),
        b"\x0b" + struct.pack("<QQ", 1, 1) + b"a" + struct.pack("<Q", 1) + b"1",
    ),
    (w.CancelWait(), b"\x0c"),
    (w.Ping(1234), b"\x0d" + struct.pack("<I", 1234)),
    (w.QueuePush(b"q", b"v"), b"\x0e" + struct.pack("<Q", 1) + b"q" + struct.pack("<Q", 1) + b"v"),
    (w.QueuePop(b"q"), b"\x0f" + struct.pack("<Q", 1) + b"q"),
    (w.QueueLen(b"q"), b"\x10" + struct.pack("<Q", 1) + b"q"),
    (w.ListKeys(), b"\x11"),
    (w.Barrier(b"b", 4), b"\x12" + struct.pack("<Q", 1) + b"b" + struct.pack("<q", 4)),
]


def test_examples_cover_every_opcode_of_torch_2_13() -> None:
    assert sorted(type(req).__name__ for req, _ in EXAMPLES) == sorted(
        cls.__name__ for cls in w._ENCODERS
    )
    assert {data[0] for _, data in EXAMPLES} == {op.value for op in w.Op}


@pytest.mark.parametrize(("req", "data"), EXAMPLES, ids=lambda v: type(v).__name__)
def test_every_request_encodes_to_torch_bytes_and_decodes_whole(
    req: w.Request, data: bytes
) -> None:
    assert w.encode_request(req) == data
    assert RequestDecoder().feed(data) == [req]


@pytest.mark.parametrize(("req", "data"), EXAMPLES, ids=lambda v: type(v).__name__)
def test_every_request_decodes_the_same_when_fed_byte_by_byte(req: w.Request, data: bytes) -> None:
    decoder = RequestDecoder()
    decoded: list[w.Request] = []
    for i in range(len(data)):
        decoded += decoder.feed(data[i : i + 1])
        if i < len(data) - 1:
            assert decoded == [], "a request was produced before its last byte"
    assert decoded == [req]
    assert decoder.buffered == 0


@pytest.mark.parametrize(("req", "data"), EXAMPLES, ids=lambda v: type(v).__name__)
def test_trailing_bytes_of_a_next_request_stay_buffered_until_complete(
    req: w.Request, data: bytes
) -> None:
    following = w.encode_request(w.Get(b"next-key"))
    decoder = RequestDecoder()
    assert decoder.feed(data + following[:5]) == [req]
    assert decoder.buffered == 5
    assert decoder.feed(following[5:]) == [w.Get(b"next-key")]


@given(st.lists(requests, max_size=8), st.data())
def test_any_chunking_of_a_request_stream_decodes_to_the_same_requests(
    reqs: list[w.Request], data: st.DataObject
) -> None:
    stream = b"".join(w.encode_request(r) for r in reqs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = RequestDecoder()
    out: list[w.Request] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        out += decoder.feed(stream[start:cut])
        start = cut
    assert out == reqs
    assert decoder.error is None


@given(requests)
def test_decode_inverts_encode(req: w.Request) -> None:
    assert RequestDecoder().feed(w.encode_request(req)) == [req]


def test_a_length_prefix_claiming_4_gib_is_refused_before_buffering() -> None:
    decoder = RequestDecoder()
    frame = b"\x01" + struct.pack("<Q", 1) + b"k" + struct.pack("<Q", 4 * 2**30)
    assert decoder.feed(w.encode_request(w.Validate()) + frame) == [w.Validate()]
    assert isinstance(decoder.error, StoreProtocolError)
    assert "exceeds the limit" in str(decoder.error)
    assert decoder.buffered == 0
    with pytest.raises(StoreProtocolError, match="exceeds the limit"):
        decoder.feed(b"more")


def test_requests_before_a_bad_frame_are_still_returned() -> None:
    decoder = RequestDecoder()
    good = w.encode_request(w.Set(b"a", b"1"))
    assert decoder.feed(good + b"\xfe junk") == [w.Set(b"a", b"1")]
    assert decoder.error is not None
    assert "unknown opcode 254" in str(decoder.error)


@pytest.mark.parametrize(
    ("limits", "req", "what"),
    [
        (w.Limits(max_key=4), w.Get(b"12345"), "key length 5"),
        (w.Limits(max_value=3), w.Set(b"k", b"1234"), "value length 4"),
        (w.Limits(max_keys=2), w.Check((b"a", b"b", b"c")), "key count 3"),
        (w.Limits(max_keys=1), w.MultiSet(((b"a", b""), (b"b", b""))), "key count 2"),
    ],
)
def test_fields_over_the_configured_limits_are_protocol_errors(
    limits: w.Limits, req: w.Request, what: str
) -> None:
    decoder = RequestDecoder(limits)
    assert decoder.feed(w.encode_request(req)) == []
    assert decoder.error is not None
    assert what in str(decoder.error)


def test_a_frame_larger_than_the_frame_limit_is_refused_while_still_incomplete() -> None:
    decoder = RequestDecoder(w.Limits(max_value=1000, max_frame=100))
    frame = w.encode_request(w.Set(b"k", b"x" * 500))
    assert decoder.feed(frame[:200]) == []
    assert decoder.error is not None
    assert "frame limit of 100 bytes" in str(decoder.error)


def test_an_http_request_is_an_unknown_opcode() -> None:
    decoder = RequestDecoder()
    assert decoder.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == []
    assert decoder.error is not None
    assert "does not speak the TCPStore protocol" in str(decoder.error)


def test_encode_request_rejects_non_messages() -> None:
    with pytest.raises(TypeError, match="not a TCPStore request message"):
        w.encode_request("SET k v")  # type: ignore[arg-type]


@given(st.lists(values, max_size=5))
def test_reply_readers_read_what_the_encoders_wrote(items: list[bytes]) -> None:
    payload = b"".join(w.encode_bytes(v) for v in items)
    assert w.read_bytes_list(bytearray(payload), 0, len(items), 1000) == (items, len(payload))
    counted = w.encode_i64(len(items)) + payload
    assert w.read_counted_bytes_list(bytearray(counted), 0, w.Limits()) == (items, len(counted))
    for cut in range(len(counted)):
        with pytest.raises(w.Incomplete):
            w.read_counted_bytes_list(bytearray(counted[:cut]), 0, w.Limits())


def test_queue_pop_reply_carries_a_value_only_when_the_queue_was_not_empty() -> None:
    assert w.read_queue_pop(bytearray(w.encode_i64(0)), 0, 10) == (None, 8)
    reply = w.encode_i64(2) + w.encode_bytes(b"v")
    assert w.read_queue_pop(bytearray(reply), 0, 10) == (b"v", len(reply))


def test_a_reply_longer_than_the_cap_is_a_protocol_error() -> None:
    with pytest.raises(StoreProtocolError, match="value length 11 exceeds the limit of 10"):
        w.read_bytes(bytearray(w.encode_bytes(b"x" * 11)), 0, 10)


@given(st.lists(st.tuples(values, values), min_size=1, max_size=4), st.data())
def test_key_value_pairs_read_whole_and_cut_anywhere_are_incomplete(
    pairs: list[tuple[bytes, bytes]], data: st.DataObject
) -> None:
    payload = b"".join(w.encode_bytes(k) + w.encode_bytes(v) for k, v in pairs)
    flat = [x for pair in pairs for x in pair]
    for kind in (bytes, bytearray):
        assert w.read_bytes_pairs(kind(payload), 0, len(pairs), 1000, 1000) == (flat, len(payload))
    cut = data.draw(st.integers(0, len(payload) - 1))
    for kind in (bytes, bytearray):
        with pytest.raises(w.Incomplete):
            w.read_bytes_pairs(kind(payload[:cut]), 0, len(pairs), 1000, 1000)
        with pytest.raises(w.Incomplete):
            w.read_bytes_list(kind(payload[:cut]), 0, len(flat), 1000)


def test_a_multi_set_names_which_of_key_and_value_is_over_its_limit() -> None:
    limits = w.Limits(max_key=4, max_value=8)
    long_key = w.encode_request(w.MultiSet(((b"k" * 5, b"v"),)))
    long_value = w.encode_request(w.MultiSet(((b"k", b"v" * 9),)))
    for payload, what, size, cap in ((long_key, "key", 5, 4), (long_value, "value", 9, 8)):
        decoder = RequestDecoder(limits)
        assert decoder.feed(payload) == []
        assert decoder.error is not None
        assert f"{what} length {size} exceeds the limit of {cap} bytes" in str(decoder.error)


def test_a_request_cut_at_the_end_of_a_read_is_kept_and_completed_by_the_next() -> None:
    first, second = w.Set(b"a", b"1"), w.Get(b"a")
    stream = w.encode_request(first) + w.encode_request(second)
    decoder = RequestDecoder()
    cut = len(w.encode_request(first)) + 3  # three bytes of the GET arrive with the SET
    assert decoder.feed(memoryview(stream[:cut])) == [first]
    assert decoder.buffered == 3
    assert decoder.feed(memoryview(stream[cut:])) == [second]
    assert decoder.buffered == 0


@given(key=keys, value=values, other=values, delta=i64, nonce=u32, many=key_tuples)
def test_a_frame_built_from_fields_is_the_encoded_request(
    key: bytes, value: bytes, other: bytes, delta: int, nonce: int, many: tuple[bytes, ...]
) -> None:
    # the client's hot path builds frames without message objects: byte for byte the same,
    # and each decodes back to its request
    pairs = [
        (w.key_value_frame(w.Op.SET, key, value), w.Set(key, value)),
        (w.key_value_frame(w.Op.APPEND, key, value), w.Append(key, value)),
        (w.key_frame(w.Op.GET, key), w.Get(key)),
        (w.keys_frame(w.Op.CHECK, many), w.Check(many)),
        (w.keys_frame(w.Op.WAIT, many), w.Wait(many)),
        (w.add_frame(key, delta), w.Add(key, delta)),
        (w.compare_set_frame(key, value, other), w.CompareSet(key, value, other)),
        (w.ping_frame(nonce), w.Ping(nonce)),
    ]
    for frame, request in pairs:
        assert frame == w.encode_request(request)
        big = w.Limits(max_key=64, max_value=256, max_keys=8)
        assert RequestDecoder(big).feed(frame) == [request]
