"""A hypothesis state machine: rdzv's TCPStore against a live rdzv server vs a dict model.

Each run gets its own server (closed in ``teardown``). ``add`` is drawn over every key, also
keys holding text that is not an integer: the model predicts the server's answer (C++
``std::stoll`` parsing) and, for a non-integer, that the server drops the connection; the
machine then checks the value is unchanged and reconnects.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rdzv.errors import StoreClosedError
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer

KEYS = st.sampled_from(["a", "c/d", "ключ", ""])
#: Text ``std::stoll`` accepts: blanks, a sign, digits, then anything.
INTEGER_TEXT = st.builds(
    lambda blanks, sign, number, tail: blanks + sign + str(number).encode() + tail,
    st.sampled_from([b"", b" ", b"\t\n "]),
    st.sampled_from([b"", b"+", b"-"]),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from([b"", b"x", b" 7", b"-"]),
)
VALUES = st.one_of(INTEGER_TEXT, st.binary(max_size=12), st.sampled_from([b"", b"-", b" ", b"+x"]))
DELTAS = st.integers(min_value=-1000, max_value=1000)
_STOLL = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def _as_integer(value: bytes | None) -> int | None:
    """What torch's server reads for ADD: missing = 0; ``std::stoll`` rules; else None."""
    if value is None:
        return 0
    found = _STOLL.match(value)
    return int(found.group(1)) if found else None


class TCPStoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.server = StoreServer("127.0.0.1", 0).start()
        self.store = TCPStore("127.0.0.1", self.server.port, timeout=10.0)
        self.model: dict[str, bytes] = {}

    def teardown(self) -> None:
        try:
            self.store.close()
        finally:
            self.server.close()

    def _reconnect(self) -> None:
        self.store.close()
        self.store = TCPStore("127.0.0.1", self.server.port, timeout=10.0)

    @rule(key=KEYS, value=VALUES)
    def set(self, key: str, value: bytes) -> None:
        self.store.set(key, value)
        self.model[key] = value

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def get_existing(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        assert self.store.get(key) == self.model[key]

    @rule(key=KEYS, delta=DELTAS)
    def add(self, key: str, delta: int) -> None:
        current = _as_integer(self.model.get(key))
        if current is None:
            with pytest.raises(StoreClosedError, match="not an integer"):
                self.store.add(key, delta)
            self._reconnect()
            return
        assert self.store.add(key, delta) == current + delta
        self.model[key] = str(current + delta).encode()

    @rule(key=KEYS, expected=VALUES, desired=VALUES)
    def compare_set(self, key: str, expected: bytes, desired: bytes) -> None:
        current = self.model.get(key)
        if current is None:
            answer = expected if expected else desired
            if not expected:
                self.model[key] = desired
        elif current == expected:
            answer = desired
            self.model[key] = desired
        else:
            answer = current
        assert self.store.compare_set(key, expected, desired) == answer

    @rule(key=KEYS)
    def delete_key(self, key: str) -> None:
        assert self.store.delete_key(key) is (key in self.model)
        self.model.pop(key, None)

    @rule(keys=st.lists(KEYS, max_size=4))
    def check(self, keys: list[str]) -> None:
        assert self.store.check(keys) is all(k in self.model for k in keys)

    @rule(items=st.dictionaries(KEYS, VALUES, max_size=4))
    def multi_set(self, items: dict[str, bytes]) -> None:
        self.store.multi_set(list(items), list(items.values()))
        self.model.update(items)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def multi_get_existing(self, data: st.DataObject) -> None:
        keys = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=1, max_size=4))
        assert self.store.multi_get(keys) == [self.model[k] for k in keys]

    @rule(key=KEYS, value=VALUES)
    def append(self, key: str, value: bytes) -> None:
        self.store.append(key, value)
        self.model[key] = self.model.get(key, b"") + value

    @invariant()
    def counts_and_listing_match_the_model(self) -> None:
        assert self.store.num_keys() == len(self.model)
        assert sorted(self.store.list_keys()) == sorted(self.model)


TCPStoreMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_tcp_store_behaves_like_a_dict_model = TCPStoreMachine.TestCase
