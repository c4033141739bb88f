"""Static backend: parameter parsing and errors (no network), plus one-node behaviour."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdzv.errors import RendezvousClosedError
from rdzv.rendezvous import _static_config
from rdzv.rendezvous.api import RendezvousParameters, RendezvousStoreInfo
from rdzv.rendezvous.static import StaticTCPRendezvous, create_handler, create_rdzv_handler
from rdzv.store.wire import _decoder


def _params(endpoint: str = "localhost:29400", nodes: int = 4, **config: Any) -> Any:
    return RendezvousParameters("static", endpoint, "run", nodes, nodes, **config)


# -- torch's own static_rendezvous_test cases ---------------------------------------------


@pytest.mark.parametrize(
    "endpoint",
    ["localhost", "", "[2001:0db8:85a3:0000:0000:8a2e:0370:7334]:90", "[::1]:90"],
)
def test_a_missing_rank_is_reported_before_anything_else(endpoint: str) -> None:
    with pytest.raises(ValueError, match=r"^rank is absent in RendezvousParameters\. Try add"):
        create_rdzv_handler(_params(endpoint, 1))


def test_a_handler_is_created_without_connecting_and_reports_static() -> None:
    handler = create_rdzv_handler(_params("localhost:123", 1, timeout=60, rank=0))
    assert handler.get_backend() == "static"
    assert handler.use_agent_store is True
    assert handler.get_run_id() == "run"
    assert handler.is_closed() is False
    assert handler.num_nodes_waiting() == 0


@pytest.mark.parametrize("endpoint", ["[::1]:90", "[2001:0db8:85a3:0000:0000:8a2e:0370:7334]:90"])
def test_ipv6_endpoints_are_accepted_with_a_rank(endpoint: str) -> None:
    handler = create_rdzv_handler(_params(endpoint, 2, rank=1))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.master_port == 90 and ":" in handler.master_addr


# -- missing pieces ------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ["", "   "])
def test_an_empty_endpoint_asks_for_master_addr_and_port(endpoint: str) -> None:
    with pytest.raises(ValueError, match=r"^endpoint is absent in RendezvousParameters\. Try add"):
        create_rdzv_handler(_params(endpoint, rank=0))


def test_an_endpoint_without_port_asks_for_master_port() -> None:
    expected = r"^Port is absent in endpoint: localhost\. Try launching with --master-port$"
    with pytest.raises(ValueError, match=expected):
        create_rdzv_handler(_params("localhost", rank=0))


def test_a_malformed_endpoint_is_reported_by_the_endpoint_parser() -> None:
    with pytest.raises(ValueError, match=r"The port number of the rendezvous endpoint 'h:99999'"):
        create_rdzv_handler(_params("h:99999", rank=0))


def test_port_zero_is_refused_for_several_nodes_because_nobody_can_dial_it() -> None:
    with pytest.raises(ValueError, match=r"port 0, which no other node can dial.*4 nodes"):
        create_rdzv_handler(_params("localhost:0", rank=0))


def test_a_variable_world_size_is_refused_naming_both_bounds() -> None:
    params = RendezvousParameters("static", "h:1", "run", 1, 4, rank=0)
    with pytest.raises(ValueError, match=r"min_nodes=1 and max_nodes=4; use --nnodes=4"):
        create_rdzv_handler(params)


# -- rank ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(0, 0), ("0", 0), (" 3 ", 3), ("2", 2)])
def test_the_rank_option_is_honoured_even_as_a_string(value: object, expected: int) -> None:
    handler = create_rdzv_handler(_params(rank=value))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.rank == expected
    assert handler.config.start_daemon is (expected == 0)  # torch: "0" hosts nothing


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (-1, r"option 'rank' of RendezvousParameters is -1, outside the ranks 0\.\.3"),
        (4, r"is 4, outside the ranks 0\.\.3 of a world of size 4"),
        ("one", r"option 'rank' of RendezvousParameters must be an integer rank; got 'one'"),
        (1.5, r"must be an integer rank; got 1\.5 \(float\)"),
        (True, r"must be an integer rank; got True \(bool\)"),
    ],
)
def test_a_bad_rank_is_refused_naming_the_value(value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        create_rdzv_handler(_params(rank=value))


# -- timeouts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(60, 60), (2.5, 2.5), ("30", 30), (" 0.5 ", 0.5), (timedelta(minutes=2), 120)],
)
def test_timeouts_accept_seconds_strings_and_timedeltas(value: object, seconds: float) -> None:
    handler = create_rdzv_handler(_params(rank=1, timeout=value, read_timeout=value))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.timeout == timedelta(seconds=seconds)
    assert handler.config.read_timeout == timedelta(seconds=seconds)


@pytest.mark.parametrize("key", ["timeout", "join_timeout", "read_timeout"])
@pytest.mark.parametrize(
    ("value", "why"),
    [
        (-5, r"got -5\."),
        (0, r"got 0\."),
        ("abc", r"got 'abc', which is not a number"),
        ("nan", r"got 'nan'"),
        (float("inf"), r"got inf"),
        (True, r"got True \(bool\)"),
        ([1], r"got \[1\] \(list\)"),
        (timedelta(seconds=-1), r"got datetime\.timedelta"),
    ],
)
def test_a_bad_timeout_is_refused_naming_the_option_and_value(
    key: str, value: object, why: str
) -> None:
    match = rf"option '{key}' of RendezvousParameters must be a positive number of seconds.*{why}"
    with pytest.raises(ValueError, match=match):
        create_rdzv_handler(_params(rank=1, **{key: value}))


def test_the_join_timeout_defaults_to_torchs_600_s_and_read_timeout_follows_it() -> None:
    handler = create_rdzv_handler(_params(rank=1))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.timeout == timedelta(seconds=600) == handler.config.read_timeout
    handler = create_rdzv_handler(_params(rank=1, join_timeout=5))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.timeout == timedelta(seconds=5) == handler.config.read_timeout


def test_conflicting_aliases_are_refused() -> None:
    with pytest.raises(ValueError, match=r"sets both 'timeout' \(5\) and its alias 'join_timeout'"):
        create_rdzv_handler(_params(rank=1, timeout=5, join_timeout=6))
    with pytest.raises(ValueError, match=r"both 'start_daemon' \(True\) and its alias 'is_host'"):
        create_rdzv_handler(_params(rank=1, start_daemon=True, is_host=False))


# -- other options -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("yes", True), ("0", False), (1, True)])
def test_start_daemon_moves_the_store_to_any_node(value: object, expected: bool) -> None:
    handler = create_rdzv_handler(_params(rank=2, start_daemon=value))
    assert isinstance(handler, StaticTCPRendezvous)
    assert handler.config.start_daemon is expected


def test_a_bad_start_daemon_value_is_refused() -> None:
    with pytest.raises(ValueError, match=r"option 'start_daemon' of .* must be a boolean.*'maybe'"):
        create_rdzv_handler(_params(rank=0, start_daemon="maybe"))


def test_listen_fd_is_only_for_the_hosting_node() -> None:
    with pytest.raises(ValueError, match=r"'listen_fd' .* rank 1, which does not host the store"):
        create_rdzv_handler(_params(rank=1, listen_fd=3))
    with pytest.raises(ValueError, match=r"'listen_fd' .* must be a non-negative file descriptor"):
        create_rdzv_handler(_params(rank=0, listen_fd="-3"))


def test_unknown_options_are_refused_listing_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['last_call_timeout'\].*accepted"):
        create_rdzv_handler(_params(rank=0, last_call_timeout=5))


# -- the positional constructor form -------------------------------------------------------


def test_the_positional_form_matches_torchs_signature() -> None:
    handler = StaticTCPRendezvous("localhost", 29500, 1, 4, "run", 60)
    assert (handler.master_addr, handler.master_port, handler.rank) == ("localhost", 29500, 1)
    assert (handler.world_size, handler.run_id, handler.timeout) == (
        4,
        "run",
        timedelta(60 / 86400),
    )


def test_the_positional_form_validates_like_the_parameters_form() -> None:
    with pytest.raises(ValueError, match=r"argument 'timeout' of the StaticTCPRendezvous .*got -1"):
        StaticTCPRendezvous("localhost", 29500, 1, 4, "run", -1)
    with pytest.raises(
        ValueError, match=r"option 'rank' of the StaticTCPRendezvous arguments is 7"
    ):
        StaticTCPRendezvous("localhost", 29500, 7, 4, "run", 60)
    with pytest.raises(TypeError, match=r"needs master_port, rank, world_size and run_id"):
        StaticTCPRendezvous("localhost", 29500)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"takes a RendezvousParameters or .* got int 5"):
        StaticTCPRendezvous(5)  # type: ignore[call-overload]


def test_create_handler_is_an_alias_of_create_rdzv_handler() -> None:
    assert create_handler is create_rdzv_handler


# -- one node, in process --------------------------------------------------------------------


def test_one_node_rendezvous_twice_on_port_zero_reports_the_real_port() -> None:
    handler = create_rdzv_handler(
        RendezvousParameters("static", "127.0.0.1:0", "solo", 1, 1, rank=0, timeout=30)
    )
    try:
        for _ in range(2):
            info = handler.next_rendezvous()
            assert (info.rank, info.world_size) == (0, 1)
            bootstrap = info.bootstrap_store_info
            assert isinstance(bootstrap, RendezvousStoreInfo) and bootstrap.master_port > 0
            info.store.set("k", "v")
            assert info.store.get("k") == b"v"
            assert info.store.timeout == timedelta(seconds=30)
    finally:
        assert handler.shutdown() is True
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # only a listener blocks
        probe.bind(("127.0.0.1", bootstrap.master_port))  # the server is gone
    with pytest.raises(RendezvousClosedError, match=r"was shut down"):
        handler.next_rendezvous()
    assert handler.shutdown() is True


def test_num_nodes_waiting_is_one_request_to_the_store() -> None:
    # torchrun polls it every monitor interval (0.1 s by default) on every agent
    handler = create_rdzv_handler(
        RendezvousParameters("static", "127.0.0.1:0", "solo", 1, 1, rank=0, timeout=30)
    )
    try:
        handler.next_rendezvous()
        channel = handler._node.store._channel  # type: ignore[attr-defined]
        send = channel.send
        sent: list[list[str]] = []

        def recorded(data: bytes, op: str, deadline: float | None) -> None:
            sent.append([type(req).__name__ for req in _decoder.RequestDecoder().feed(data)])
            send(data, op, deadline)

        channel.send = recorded
        assert [handler.num_nodes_waiting() for _ in range(3)] == [0, 0, 0]
        assert sent == [["Add"]] * 3
    finally:
        assert handler.shutdown() is True


def test_closing_before_joining_fails_the_next_rendezvous_without_network() -> None:
    handler = create_rdzv_handler(_params("127.0.0.1:9", 2, rank=1, timeout=1))
    handler.set_closed()
    assert handler.is_closed() is True
    with pytest.raises(RendezvousClosedError, match=r"run 'run' was closed by this node"):
        handler.next_rendezvous()


# -- the common positional form's few-step check -----------------------------------------

# One well-formed set of arguments, with at most two of them replaced by anything (what
# the quick check must either decide as the general checks do, or leave to them).
_WELL_FORMED = {
    "host": st.sampled_from(["localhost", "127.0.0.1", "::1", "n0"]),
    "port": st.sampled_from([1, 29500, 65535]),
    "rank": st.integers(0, 3),
    "world_size": st.integers(4, 9),
    "run_id": st.sampled_from(["run", "", "a/b"]),
    "timeout": st.sampled_from([30, 0.5, 1e-300, 86_399_999_999_999.0]),
    "read_timeout": st.none(),
    "start_daemon": st.none(),
}
_ODD_VALUES = [0, -1, 1, 3, 4, 65536, 10**15, 2**70, True, False, None, "", " n0", "n0 ", "1"]
_ODD_VALUES += [1.0, -0.5, float("nan"), float("inf"), 1e300, timedelta(seconds=5)]
_ANYTHING = st.one_of(st.sampled_from(_ODD_VALUES), st.floats())
_BASE = {"host": "n0", "port": 29500, "rank": 1, "world_size": 4, "run_id": "run"}
_BASE |= {"timeout": 30, "read_timeout": None, "start_daemon": None}


def _config_or_error(values: dict[str, Any]) -> tuple[str, str]:
    arguments = [values[name] for name in ("host", "port", "rank", "world_size", "run_id")]
    options = {name: values[name] for name in ("rank", "timeout", "read_timeout", "start_daemon")}
    options["listen_fd"] = None
    try:
        return "config", repr(_static_config.config_from_arguments(*arguments, options))
    except (TypeError, ValueError, AttributeError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("name", sorted(_BASE))
@pytest.mark.parametrize("value", _ODD_VALUES, ids=repr)
def test_each_argument_out_of_the_ordinary_is_decided_as_the_general_checks_do(
    name: str, value: Any
) -> None:
    values = dict(_BASE, **{name: value})
    quick = _config_or_error(values)
    with patch.object(_static_config, "_plain_arguments", return_value=None):
        general = _config_or_error(values)
    assert quick == general


@settings(max_examples=500, deadline=None)
@given(
    values=st.fixed_dictionaries(_WELL_FORMED),
    replaced=st.dictionaries(st.sampled_from(sorted(_WELL_FORMED)), _ANYTHING, max_size=2),
)
def test_the_positional_forms_quick_check_decides_as_the_general_checks_do(
    values: dict[str, Any], replaced: dict[str, Any]
) -> None:
    values.update(replaced)
    quick = _config_or_error(values)
    with patch.object(_static_config, "_plain_arguments", return_value=None):
        general = _config_or_error(values)
    assert quick == general


def test_the_common_positional_form_takes_the_quick_check() -> None:
    options = {"rank": 3, "timeout": 30, "read_timeout": None, "start_daemon": None}
    options["listen_fd"] = None
    quick = _static_config._plain_arguments("10.0.0.1", 29500, 8, "job", options)
    assert quick is not None
    assert (quick.host, quick.port, quick.rank, quick.world_size) == ("10.0.0.1", 29500, 3, 8)
    assert quick.join_timeout == quick.read_timeout == timedelta(seconds=30)
    assert quick.start_daemon is False
    options["read_timeout"] = 5  # any other option: the general checks
    assert _static_config._plain_arguments("10.0.0.1", 29500, 8, "job", options) is None
