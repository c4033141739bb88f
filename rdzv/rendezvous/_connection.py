"""A node's connections to the rendezvous store: its own, a fresh one, closing one.

``dial`` opens the connection a handler keeps across rounds (the hosting node starts the
store server first); ``reconnect`` opens a second one to the same server (and
``fresh_connection`` one without touching the first's timeout: the member watch's) and ``publish``
writes a verdict over it (a member that lost its own connection reports that over a fresh
one, invariant 7 of :mod:`rdzv.rendezvous._join`); ``close_store`` releases a connection
(and a hosted server); ``hosted_server`` is the server a connection hosts, if any. The store
is used through its public modules only (``rdzv.store.client``, ``rdzv.store.server``,
``rdzv.store.base``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator

from rdzv.errors import StoreConnectionError, StoreError
from rdzv.rendezvous._static_config import StaticConfig
from rdzv.store.client import Ended, TCPStore, express

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdzv.store.base import Store
    from rdzv.store.server import StoreServer

__all__ = [
    "close_store",
    "dial",
    "dial_member",
    "fresh_connection",
    "hosted_server",
    "publish",
    "reconnect",
]


def dial(cfg: StaticConfig, connect_timeout: float) -> Store:
    """This node's connection to the store at ``cfg.endpoint``, made within
    ``connect_timeout`` seconds; its operations are bounded by ``cfg.read_timeout``. The
    hosting node (``cfg.start_daemon``) first starts the server (shared with the other
    handlers of this process that host the same port).

    The hosting node listens before it imports the server (its own epoll loop, no
    asyncio: the one import a process's first round makes, and only on the hosting
    node): the others' connections wait in the listen backlog meanwhile, instead
    of being refused and retried, which would take the CPU the import needs.

    Raises:
        StoreError: the server could not be started (``StoreBindError``), or no store
            answered in time.
    """
    listen_fd = cfg.listen_fd
    if cfg.start_daemon and listen_fd is None:
        from rdzv.store.server import listen_ahead  # imports the server's bind rules only

        listen_fd = listen_ahead(cfg.host, cfg.port)
    return TCPStore(
        cfg.host,
        cfg.port,
        cfg.world_size,  # the server grows its descriptor table for them up front
        cfg.start_daemon,
        cfg.read_timeout,
        wait_for_workers=False,
        multi_tenant=True,
        master_listen_fd=listen_fd,
        connect_timeout=connect_timeout,
    )


def dial_member(
    cfg: StaticConfig, script: Generator[tuple[str, Any, float], Any, Any], connect_timeout: float
) -> Ended:
    """A member's connection, as :func:`dial` makes it, with ``script`` (its join's happy
    path, :mod:`rdzv.rendezvous._express`) run on it from its first attempt when that
    reaches an rdzv server (:func:`rdzv.store.client.express`).

    Raises:
        StoreError: no store answered in time.
    """
    read_timeout = cfg.read_timeout.total_seconds()
    return express(cfg.host, cfg.port, cfg.world_size, read_timeout, connect_timeout, script)


def hosted_server(store: Store) -> StoreServer | None:
    """The server ``store`` hosts (:attr:`rdzv.store.client.TCPStore.server`: a master
    ``TCPStore``), or None: a client, or a store of another kind."""
    return store.server if isinstance(store, TCPStore) else None


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
