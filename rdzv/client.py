"""Alias of :mod:`rdzv.store.client`: where ``TCPStore`` lives."""

from rdzv.store import client as _client
from rdzv.store.client import *  # noqa: F403

__all__ = list(_client.__all__)
