"""Alias of :mod:`rdzv.rendezvous.registry`: backend name -> handler factory."""

from rdzv.rendezvous import registry as _registry
from rdzv.rendezvous.registry import *  # noqa: F403

__all__ = list(_registry.__all__)
