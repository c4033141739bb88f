"""Public names, signatures and messages match torch's rendezvous API (needs torch)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from rdzv.rendezvous import api, registry, static

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def torch_rdzv() -> Any:
    pytest.importorskip("torch")
    import torch.distributed.elastic.rendezvous as rendezvous
    import torch.distributed.elastic.rendezvous.registry
    import torch.distributed.elastic.rendezvous.static_tcp_rendezvous  # noqa: F401

    return rendezvous


def _shape(func: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """Parameter names, kinds and defaults: what a caller relies on (not annotations)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


def test_every_public_name_of_torchs_modules_exists_here(torch_rdzv: Any) -> None:
    assert set(torch_rdzv.__all__) == set(api.__all__)
    assert set(torch_rdzv.api.__all__) == set(api.__all__)
    for name in torch_rdzv.__all__:
        assert getattr(api, name) is not None
    assert set(torch_rdzv.static_tcp_rendezvous.__all__) <= set(static.__all__)
    assert set(torch_rdzv.registry.__all__) <= set(registry.__all__)


@pytest.mark.parametrize(
    "path",
    [
        "RendezvousParameters.__init__",
        "RendezvousParameters.get",
        "RendezvousParameters.get_as_bool",
        "RendezvousParameters.get_as_int",
        "RendezvousStoreInfo.build",
        "RendezvousInfo.__init__",
        "RendezvousHandlerRegistry.register",
        "RendezvousHandlerRegistry.create_handler",
        "RendezvousHandler.get_backend",
        "RendezvousHandler.next_rendezvous",
        "RendezvousHandler.is_closed",
        "RendezvousHandler.set_closed",
        "RendezvousHandler.num_nodes_waiting",
        "RendezvousHandler.get_run_id",
        "RendezvousHandler.shutdown",
    ],
)
def test_api_signatures_match(torch_rdzv: Any, path: str) -> None:
    cls_name, attr = path.split(".")
    ours = getattr(getattr(api, cls_name), attr)
    theirs = getattr(getattr(torch_rdzv.api, cls_name), attr)
    assert _shape(ours) == _shape(theirs)


def test_factories_and_the_handler_constructor_match(torch_rdzv: Any) -> None:
    theirs = torch_rdzv.static_tcp_rendezvous
    assert _shape(static.create_rdzv_handler) == _shape(theirs.create_rdzv_handler)
    assert _shape(registry.get_rendezvous_handler) == _shape(
        torch_rdzv.registry.get_rendezvous_handler
    )
    torch_init = [name for name, _, _ in _shape(theirs.StaticTCPRendezvous.__init__)]
    our_init = [name for name, _, _ in _shape(static.StaticTCPRendezvous.__init__)]
    assert our_init[: len(torch_init)] == torch_init  # rdzv adds keyword-only options only


def test_the_handler_contract_is_the_same(torch_rdzv: Any) -> None:
    theirs = torch_rdzv.api.RendezvousHandler
    assert api.RendezvousHandler.__abstractmethods__ == theirs.__abstractmethods__
    assert isinstance(inspect.getattr_static(api.RendezvousHandler, "use_agent_store"), property)
    for key in ("MASTER_ADDR_KEY", "MASTER_PORT_KEY"):
        assert getattr(api.RendezvousStoreInfo, key) == getattr(torch_rdzv.RendezvousStoreInfo, key)


def test_error_classes_have_torchs_names_and_shape(torch_rdzv: Any) -> None:
    for name in torch_rdzv.__all__:
        theirs = getattr(torch_rdzv, name)
        if isinstance(theirs, type) and issubclass(theirs, Exception):
            ours = getattr(api, name)
            assert [c.__name__ for c in ours.__mro__ if c.__name__.startswith("Rendezvous")] == [
                c.__name__ for c in theirs.__mro__ if c.__name__.startswith("Rendezvous")
            ]


def _message(call: Callable[[], Any]) -> tuple[str, str]:
    try:
        call()
    except Exception as exc:  # compared across the two libraries by the caller
        return type(exc).__name__, str(exc)
    raise AssertionError("expected an exception")


@pytest.mark.parametrize(
    "args",
    [("", "h:1", "r", 1, 1), ("b", "h:1", "r", 0, 1), ("b", "h:1", "r", 3, 2)],
)
def test_parameter_validation_messages_are_torchs(torch_rdzv: Any, args: tuple) -> None:
    assert _message(lambda: api.RendezvousParameters(*args)) == _message(
        lambda: torch_rdzv.RendezvousParameters(*args)
    )


@pytest.mark.parametrize(
    ("method", "value"),
    [("get_as_bool", "01"), ("get_as_bool", 2), ("get_as_int", "3b"), ("get_as_int", "a")],
)
def test_option_conversion_messages_are_torchs(torch_rdzv: Any, method: str, value: Any) -> None:
    ours = api.RendezvousParameters("b", "h:1", "r", 1, 1, key=value)
    theirs = torch_rdzv.RendezvousParameters("b", "h:1", "r", 1, 1, key=value)
    assert _message(lambda: getattr(ours, method)("key")) == _message(
        lambda: getattr(theirs, method)("key")
    )


def test_registry_messages_are_torchs(torch_rdzv: Any) -> None:
    def creator(params: Any) -> Any:
        raise AssertionError("not called")

    def other(params: Any) -> Any:
        raise AssertionError("not called")

    ours, theirs = registry.RendezvousHandlerRegistry(), torch_rdzv.RendezvousHandlerRegistry()
    for reg in (ours, theirs):
        reg.register("x", creator)
    assert _message(lambda: ours.register("x", other)) == _message(
        lambda: theirs.register("x", other)
    )
    ours_params = api.RendezvousParameters("nope", "h:1", "r", 1, 1)
    theirs_params = torch_rdzv.RendezvousParameters("nope", "h:1", "r", 1, 1)
    assert _message(lambda: ours.create_handler(ours_params)) == _message(
        lambda: theirs.create_handler(theirs_params)
    )
