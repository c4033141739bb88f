"""Alias of :mod:`rdzv.store.server`: where ``StoreServer`` lives."""

from rdzv.store import server as _server
from rdzv.store.server import *  # noqa: F403

__all__ = list(_server.__all__)
