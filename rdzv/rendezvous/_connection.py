"""A node's connections to the rendezvous store: its own, a fresh one, closing one.

``dial`` opens the connection a handler keeps across rounds (the hosting node starts the
store server first); ``reconnect`` opens a second one to the same server (and
``fresh_connection`` one without touching the first's timeout: the member watch's) and ``publish``
writes a verdict over it (a member that lost its own connection reports that over a fresh
one, invariant 7 of :mod:`rdzv.rendezvous._join`); ``close_store`` releases a connection
(and a hosted server).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from rdzv.errors import StoreConnectionError, StoreError
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.client import TCPStore

if TYPE_CHECKING:
    from rdzv.store.base import Store

__all__ = ["close_store", "dial", "fresh_connection", "load_server", "publish", "reconnect"]

#: The store server's module: only the hosting node imports it (it brings asyncio).
_SERVER_MODULE = "rdzv.store.server"


def load_server(cfg: StaticConfig) -> None:
    """Import what :func:`dial` will need beyond this module, so that a node's first round
    imports nothing: the store server (and asyncio with it) when ``cfg.start_daemon``; a node
    that does not host never imports it."""
    if cfg.start_daemon:
        importlib.import_module(_SERVER_MODULE)


def dial(cfg: StaticConfig, connect_timeout: float) -> Store:
    """This node's connection to the store at ``cfg.endpoint``, made within
    ``connect_timeout`` seconds; its operations are bounded by ``cfg.read_timeout``. The
    hosting node (``cfg.start_daemon``) first starts the server (shared with the other
    handlers of this process that host the same port).

    Raises:
        StoreError: the server could not be started (``StoreBindError``), or no store
            answered in time.
    """
    return TCPStore(
        cfg.host,
        cfg.port,
        None,
        cfg.start_daemon,
        cfg.read_timeout,
        wait_for_workers=False,
        multi_tenant=True,
        master_listen_fd=cfg.listen_fd,
        connect_timeout=connect_timeout,
    )


def reconnect(store: Store, seconds: float) -> Store:
    """A fresh connection to ``store``'s server; connecting and each operation within
    ``seconds``.

    Raises:
        StoreError: no connection could be made in time, or ``store`` cannot open another.
    """
    clone = getattr(store, "clone", None)
    if not callable(clone):
        raise StoreConnectionError(f"{store!r} cannot open a second connection")
    store.set_timeout(seconds)  # a clone inherits it (connect timeout included)
    fresh: Store = clone()
    return fresh


def fresh_connection(store: Store, seconds: float) -> Store:
    """A fresh connection to ``store``'s server; connecting and each operation within
    ``seconds``. Unlike :func:`reconnect`, ``store``'s own timeout is left as it is (another
    thread may be using ``store``).

    Raises:
        StoreError: no connection could be made in time, or ``store`` cannot open another.
    """
    clone = getattr(store, "clone", None)
    if not callable(clone):
        raise StoreConnectionError(f"{store!r} cannot open a second connection")
    fresh: Store = clone(timeout=seconds)
    return fresh


def publish(reconnect: Callable[[float], Store], seconds: float, key: str, encoded: bytes) -> bool:
    """Write the verdict ``encoded`` with ``compare_set("", ...)`` on ``key`` over a fresh
    connection (opened and used within ``seconds``, then closed); return whether it won.

    Raises:
        StoreError: no connection could be made, or the write failed.
    """
    fresh = reconnect(seconds)
    try:
        return fresh.compare_set(key, "", encoded) == encoded
    finally:
        close_store(fresh)


def close_store(store: Store) -> None:
    """Close ``store``'s connection (and server) if it has any; never raises a store error."""
    close = getattr(store, "close", None)
    if callable(close):
        with contextlib.suppress(StoreError, OSError):
            close()
