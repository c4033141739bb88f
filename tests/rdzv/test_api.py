"""rdzv.rendezvous.api: torch's parameter validation, results, handler ABC and error classes."""

from __future__ import annotations

import pytest

from rdzv.rendezvous import api
from rdzv.rendezvous.api import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStateError,
    RendezvousStoreInfo,
    RendezvousTimeoutError,
)
from rdzv.store.base import HashStore, PrefixStore


def _params(**config: object) -> RendezvousParameters:
    return RendezvousParameters("static", "localhost:1", "run", 1, 1, **config)


def test_parameters_keep_every_argument_and_the_backend_options() -> None:
    params = RendezvousParameters("b", "h:1", "r", 2, 3, "10.0.0.1", dummy_param="x")
    assert (params.backend, params.endpoint, params.run_id) == ("b", "h:1", "r")
    assert (params.min_nodes, params.max_nodes, params.local_addr) == (2, 3, "10.0.0.1")
    assert params.config == {"dummy_param": "x"}
    assert params.get("dummy_param") == "x"


@pytest.mark.parametrize("backend", [None, ""])
def test_parameters_reject_an_empty_backend_name(backend: str | None) -> None:
    with pytest.raises(
        ValueError, match=r"^The rendezvous backend name must be a non-empty string\.$"
    ):
        RendezvousParameters(backend, "h:1", "r", 1, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("min_nodes", [0, -1, -5])
def test_parameters_reject_fewer_than_one_minimum_node(min_nodes: int) -> None:
    expected = (
        rf"^The minimum number of rendezvous nodes \({min_nodes}\) must be greater than zero\.$"
    )
    with pytest.raises(ValueError, match=expected):
        RendezvousParameters("b", "h:1", "r", min_nodes, 3)


@pytest.mark.parametrize("max_nodes", [2, 1, -2])
def test_parameters_reject_a_maximum_below_the_minimum(max_nodes: int) -> None:
    expected = (
        rf"^The maximum number of rendezvous nodes \({max_nodes}\) must be greater than or equal"
        r" to the minimum number of rendezvous nodes \(3\)\.$"
    )
    with pytest.raises(ValueError, match=expected):
        RendezvousParameters("b", "h:1", "r", 3, max_nodes)


def test_parameters_accept_empty_endpoint_and_run_id_like_torch() -> None:
    params = RendezvousParameters("b", "", "", 1, 1)
    assert (params.endpoint, params.run_id) == ("", "")


def test_get_returns_the_default_for_a_missing_key() -> None:
    assert _params().get("missing") is None
    assert _params().get("missing", "x") == "x"


@pytest.mark.parametrize("value", ["1", "True", "tRue", "T", "t", "yEs", "Y", 1, True])
def test_get_as_bool_reads_torchs_true_spellings(value: object) -> None:
    assert _params(dummy_param=value).get_as_bool("dummy_param") is True


@pytest.mark.parametrize("value", ["0", "False", "faLse", "F", "f", "nO", "N", 0, False])
def test_get_as_bool_reads_torchs_false_spellings(value: object) -> None:
    assert _params(dummy_param=value).get_as_bool("dummy_param") is False


@pytest.mark.parametrize("value", ["01", "Flse", "Ture", "g", "4", "_", "truefalse", 2, -1, 1.5])
def test_get_as_bool_rejects_anything_else_naming_the_key(value: object) -> None:
    expected = (
        r"^The rendezvous configuration option 'dummy_param' does not represent a valid boolean"
        r" value\.$"
    )
    with pytest.raises(ValueError, match=expected):
        _params(dummy_param=value).get_as_bool("dummy_param")


def test_get_as_bool_parses_the_default_too() -> None:
    assert _params().get_as_bool("missing") is None
    assert _params().get_as_bool("missing", True) is True
    assert _params().get_as_bool("missing", "yes") is True  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("-10", -10),
        ("5", 5),
        ("  4", 4),
        ("4  ", 4),
        (" 4 ", 4),
        (0, 0),
        (-4, -4),
        (3, 3),
    ],
)
def test_get_as_int_converts_like_int(value: object, expected: int) -> None:
    assert _params(dummy_param=value).get_as_int("dummy_param") == expected


@pytest.mark.parametrize("value", ["a", "0a", "3b", "abc"])
def test_get_as_int_rejects_non_integers_naming_the_key(value: str) -> None:
    expected = (
        r"^The rendezvous configuration option 'dummy_param' does not represent a valid integer"
        r" value\.$"
    )
    with pytest.raises(ValueError, match=expected):
        _params(dummy_param=value).get_as_int("dummy_param")


def test_get_as_int_rejects_a_list_with_a_type_error_naming_the_key() -> None:
    with pytest.raises(TypeError, match=r"option 'dummy_param' is a list \(\[1\]\)"):
        _params(dummy_param=[1]).get_as_int("dummy_param")


def test_get_as_int_returns_the_default_for_a_missing_key() -> None:
    assert _params().get_as_int("missing") is None
    assert _params().get_as_int("missing", 5) == 5


def test_rendezvous_info_exposes_its_fields_read_only() -> None:
    store = HashStore()
    bootstrap = RendezvousStoreInfo("h", 7)
    info = RendezvousInfo(store, 2, 4, bootstrap)
    assert (info.store, info.rank, info.world_size) == (store, 2, 4)
    assert info.bootstrap_store_info is bootstrap
    with pytest.raises(AttributeError):
        info.rank = 3  # type: ignore[misc]


def test_store_info_build_publishes_from_rank_0_and_every_rank_reads_it() -> None:
    store = PrefixStore("x", HashStore())
    built = RendezvousStoreInfo.build(0, store, "10.1.2.3", server_port=4567)
    assert built == RendezvousStoreInfo("10.1.2.3", 4567)
    assert store.get("MASTER_ADDR") == b"10.1.2.3"
    assert store.underlying_store.get("x/MASTER_PORT") == b"4567"
    assert RendezvousStoreInfo.build(1, store, None) == built


def test_store_info_build_picks_a_port_when_rank_0_gives_none() -> None:
    built = RendezvousStoreInfo.build(0, HashStore(), "h")
    assert 0 < built.master_port < 65536


def test_handler_abc_requires_torchs_abstract_methods() -> None:
    assert RendezvousHandler.__abstractmethods__ == {
        "get_backend",
        "next_rendezvous",
        "is_closed",
        "set_closed",
        "num_nodes_waiting",
        "get_run_id",
        "shutdown",
    }
    with pytest.raises(TypeError, match="abstract"):
        RendezvousHandler()  # type: ignore[abstract]


def test_timeout_and_connection_errors_are_also_builtin_errors() -> None:
    assert issubclass(RendezvousTimeoutError, TimeoutError)
    assert issubclass(RendezvousConnectionError, ConnectionError)
    for cls in (
        RendezvousClosedError,
        RendezvousConnectionError,
        RendezvousStateError,
        RendezvousTimeoutError,
        RendezvousGracefulExitError,
    ):
        assert issubclass(cls, RendezvousError)


def test_registry_names_are_reachable_from_the_api_module_like_torchs() -> None:
    from rdzv.rendezvous import registry

    assert api.RendezvousHandlerRegistry is registry.RendezvousHandlerRegistry
    assert api.rendezvous_handler_registry is registry.rendezvous_handler_registry
    assert set(api.__all__) <= set(dir(api)) | {
        "RendezvousHandlerRegistry",
        "rendezvous_handler_registry",
    }
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        api.nope  # noqa: B018
