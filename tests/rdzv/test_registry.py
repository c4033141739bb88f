"""rdzv.rendezvous.registry: torch's registry messages, the static backend and plugins."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from rdzv.events import EventCollector
from rdzv.rendezvous import registry
from rdzv.rendezvous.api import RendezvousHandler, RendezvousInfo, RendezvousParameters
from rdzv.rendezvous.registry import (
    RendezvousHandlerRegistry,
    create_handler,
    get_rendezvous_handler,
    load_entry_point_handlers,
    rendezvous_handler_registry,
)
from rdzv.rendezvous.static import StaticTCPRendezvous


class _Handler(RendezvousHandler):
    def __init__(self, params: RendezvousParameters, backend: str) -> None:
        self.params = params
        self.backend = backend

    def get_backend(self) -> str:
        return self.backend

    def next_rendezvous(self) -> RendezvousInfo:
        raise NotImplementedError

    def is_closed(self) -> bool:
        return False

    def set_closed(self) -> None:
        raise NotImplementedError

    def num_nodes_waiting(self) -> int:
        return 0

    def get_run_id(self) -> str:
        return self.params.run_id

    def shutdown(self) -> bool:
        return True


def _creator(params: RendezvousParameters) -> RendezvousHandler:
    return _Handler(params, "dummy_backend")


def _other_creator(params: RendezvousParameters) -> RendezvousHandler:
    return _Handler(params, "dummy_backend")


def _params(backend: str = "dummy_backend", **config: Any) -> RendezvousParameters:
    return RendezvousParameters(backend, "localhost:29400", "run", 1, 1, **config)


def test_registering_the_same_creator_twice_is_allowed() -> None:
    reg = RendezvousHandlerRegistry()
    reg.register("dummy_backend", _creator)
    reg.register("dummy_backend", _creator)
    assert reg.backends() == ["dummy_backend"]


def test_registering_a_second_creator_names_both() -> None:
    reg = RendezvousHandlerRegistry()
    reg.register("dummy_backend", _creator)
    expected = (
        rf"^The rendezvous backend 'dummy_backend' cannot be registered with '{_other_creator}'"
        rf" as it is already registered with '{_creator}'\.$"
    )
    with pytest.raises(ValueError, match=expected):
        reg.register("dummy_backend", _other_creator)


def test_registering_an_empty_name_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"^The rendezvous backend name must be a non-empty"):
        RendezvousHandlerRegistry().register("", _creator)


def test_create_handler_returns_the_creators_handler_for_these_params() -> None:
    reg = RendezvousHandlerRegistry()
    reg.register("dummy_backend", _creator)
    params = _params()
    handler = reg.create_handler(params)
    assert isinstance(handler, _Handler) and handler.params is params


def test_create_handler_for_an_unknown_backend_says_to_register_it() -> None:
    expected = (
        r"^The rendezvous backend 'dummy_backend' is not registered\."
        r" Did you forget to call `register`\?$"
    )
    with pytest.raises(ValueError, match=expected):
        RendezvousHandlerRegistry().create_handler(_params())


def test_create_handler_rejects_a_handler_of_another_backend() -> None:
    reg = RendezvousHandlerRegistry()
    reg.register("dummy_backend_2", _creator)
    expected = (
        r"^The rendezvous backend 'dummy_backend' does not match the requested backend"
        r" 'dummy_backend_2'\.$"
    )
    with pytest.raises(RuntimeError, match=expected):
        reg.create_handler(_params("dummy_backend_2"))


def test_the_default_registry_builds_static_handlers_without_touching_the_network() -> None:
    assert "static" in rendezvous_handler_registry.backends()
    params = _params("static", rank=0, timeout=60)
    for factory in (get_rendezvous_handler, create_handler):
        handler = factory(params)
        assert isinstance(handler, StaticTCPRendezvous)
        assert handler.get_backend() == "static"


class _FakeEntryPoints:
    def __init__(self, points: list[EntryPoint]) -> None:
        self.points = points
        self.groups: list[str] = []

    def __call__(self, *, group: str) -> list[EntryPoint]:
        self.groups.append(group)
        return self.points


def _ep(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=target, group=registry.ENTRY_POINT_GROUP)


def plugin_factory() -> Any:
    """What a plugin's entry point names: a zero-argument callable returning the creator."""
    return _plugin_creator


def _plugin_creator(params: RendezvousParameters) -> RendezvousHandler:
    return _Handler(params, "plugged")


def test_entry_point_plugins_are_called_and_registered_under_their_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeEntryPoints([_ep("plugged", f"{__name__}:plugin_factory")])
    monkeypatch.setattr(registry, "entry_points", fake)
    reg = RendezvousHandlerRegistry()
    assert load_entry_point_handlers(reg) == ["plugged"]
    assert fake.groups == ["rdzv.handlers"]
    assert isinstance(reg.create_handler(_params("plugged")), _Handler)


def test_a_broken_plugin_is_reported_and_the_others_still_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = _ep("broken", "rdzv_no_such_module:factory")
    fake = _FakeEntryPoints([broken, _ep("plugged", f"{__name__}:plugin_factory")])
    monkeypatch.setattr(registry, "entry_points", fake)
    collector = EventCollector()
    logger = logging.getLogger("rdzv.rendezvous")
    logger.addHandler(collector)
    try:
        assert load_entry_point_handlers(RendezvousHandlerRegistry()) == ["plugged"]
    finally:
        logger.removeHandler(collector)
    (event,) = [e for e in collector.events if e["event"] == "plugin_failed"]
    assert event["backend"] == "broken"
    assert "ModuleNotFoundError" in event["error"]
