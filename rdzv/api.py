"""Alias of :mod:`rdzv.rendezvous.api`: torch's handler ABC, parameters and results."""

from rdzv.rendezvous import api as _api
from rdzv.rendezvous.api import *  # noqa: F403
from rdzv.rendezvous.registry import RendezvousHandlerRegistry, rendezvous_handler_registry

__all__ = ["RendezvousHandlerRegistry", "rendezvous_handler_registry"]
__all__ += [name for name in _api.__all__ if name not in __all__]
