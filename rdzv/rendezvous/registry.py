"""Backend name -> handler factory, with torch's registry API and messages.

``rendezvous_handler_registry`` comes with the ``static`` backend registered (imported
with this module, so that ``from rdzv import create_handler`` imports all a join needs)
and with every third-party backend advertised in the entry-point group ``rdzv.handlers``,
looked up the first time a backend
is asked for that is not registered (or :meth:`~RendezvousHandlerRegistry.backends` is
called): reading every installed distribution's metadata costs milliseconds that a
``static`` handler does not need to pay. Like torch's ``torchrun.handlers``
group, each entry point names a zero-argument callable that returns the creator::

    [project.entry-points."rdzv.handlers"]
    my_backend = "my_pkg.rdzv_plugin:get_creator"   # get_creator() -> RendezvousHandlerCreator

torch's own ``torchrun.handlers`` group is deliberately *not* read: those plugins build
torch handlers from torch's types and would import torch into every rdzv process. Register
such a creator explicitly with ``rendezvous_handler_registry.register(name, creator)``.

A plugin that fails to load is logged as a warning (and a ``plugin_failed`` event on the
``rdzv.rendezvous`` logger); the other backends stay usable.
"""

from __future__ import annotations

from rdzv.events import WARNING, emit, get_logger
from rdzv.rendezvous.api import RendezvousHandler, RendezvousHandlerCreator, RendezvousParameters
from rdzv.rendezvous.static import create_rdzv_handler

TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

__all__ = [
    "ENTRY_POINT_GROUP",
    "RendezvousHandlerRegistry",
    "create_handler",
    "get_rendezvous_handler",
    "load_entry_point_handlers",
    "rendezvous_handler_registry",
]

ENTRY_POINT_GROUP = "rdzv.handlers"

_log = get_logger("rdzv.rendezvous")


class RendezvousHandlerRegistry:
    """Maps backend names to the callables that build their handlers (torch's class)."""

    def __init__(self) -> None:
        self._registry: dict[str, RendezvousHandlerCreator] = {}
        self._plugin_group: str | None = None  # entry points not looked up yet

    def _load_plugins(self) -> None:
        group, self._plugin_group = self._plugin_group, None
        if group is not None:
            load_entry_point_handlers(self, group)

    def register(self, backend: str, creator: RendezvousHandlerCreator) -> None:
        """Register ``creator`` under ``backend``; registering the same pair again is fine.

        Raises:
            ValueError: ``backend`` is empty, or already registered with another creator.
        """
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        current = self._registry.get(backend)
        if current is not None and current != creator:
            raise ValueError(
                " ".join(
                    (
                        f"The rendezvous backend '{backend}' cannot be registered with",
                        f"'{creator}' as it is already registered with '{current}'.",
                    )
                )
            )
        self._registry[backend] = creator

    def create_handler(self, params: RendezvousParameters) -> RendezvousHandler:
        """Build the handler of ``params.backend``.

        Raises:
            ValueError: the backend is not registered (torch's message), or the creator
                rejected ``params``.
            RuntimeError: the handler reports a different backend name than requested.
        """
        if params.backend not in self._registry:
            self._load_plugins()
        try:
            creator = self._registry[params.backend]
        except KeyError as exc:
            hint = "Did you forget to call `register`?"
            raise ValueError(
                f"The rendezvous backend '{params.backend}' is not registered. {hint}"
            ) from exc
        handler = creator(params)
        actual = handler.get_backend()
        if actual != params.backend:
            requested = f"the requested backend '{params.backend}'"
            raise RuntimeError(f"The rendezvous backend '{actual}' does not match {requested}.")
        return handler

    def backends(self) -> list[str]:
        """Return the registered backend names, sorted (an rdzv extension)."""
        self._load_plugins()
        return sorted(self._registry)


def _create_static_handler(params: RendezvousParameters) -> RendezvousHandler:
    return create_rdzv_handler(params)


def entry_points(*, group: str) -> EntryPoints:
    """The entry points of ``group`` (``importlib.metadata`` is imported only now)."""
    from importlib import metadata

    return metadata.entry_points(group=group)


def load_entry_point_handlers(
    registry: RendezvousHandlerRegistry, group: str = ENTRY_POINT_GROUP
) -> list[str]:
    """Register every backend advertised in the entry-point ``group``.

    Each entry point is loaded and called with no arguments; what it returns is the
    creator registered under the entry point's name. Failures are logged, not raised, so
    one broken plugin cannot take the other backends down.

    Returns:
        The names of the backends registered from this group.
    """
    loaded: list[str] = []
    for ep in entry_points(group=group):
        try:
            registry.register(ep.name, ep.load()())
        except Exception as exc:
            _log.warning(
                "Exception while registering out-of-tree rendezvous backend %r from %r",
                ep.name,
                ep.value,
                exc_info=True,
            )
            emit(
                _log,
                "plugin_failed",
                WARNING,
                backend=ep.name,
                entry_point=ep.value,
                error=f"{type(exc).__name__}: {exc}",
            )
        else:
            loaded.append(ep.name)
    return loaded


def _default_registry() -> RendezvousHandlerRegistry:
    registry = RendezvousHandlerRegistry()
    registry.register("static", _create_static_handler)
    registry._plugin_group = ENTRY_POINT_GROUP  # looked up when first needed
    return registry


rendezvous_handler_registry = _default_registry()
"""The process-wide registry launchers use (torch's name)."""


def get_rendezvous_handler(params: RendezvousParameters) -> RendezvousHandler:
    """Build the handler ``params.backend`` names, from :data:`rendezvous_handler_registry`.

    Raises:
        ValueError: the backend is not registered, or it rejected ``params``.
        RuntimeError: the handler reports a different backend name than requested.
    """
    return rendezvous_handler_registry.create_handler(params)


create_handler = get_rendezvous_handler
"""Alias of :func:`get_rendezvous_handler`: ``rdzv.create_handler(params)``."""
