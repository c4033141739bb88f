"""rdzv: a static rendezvous library with torch's API and honest semantics.

Switch from torch with one import::

    # from torch.distributed.elastic.rendezvous import RendezvousParameters
    # from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler
    from rdzv import RendezvousParameters, get_rendezvous_handler

Module map (lower layers never import higher ones):

* ``errors`` ``events`` ``endpoint``  the exception tree, structured log events (and
  ``_event_collector``, their ``logging.Handler``), endpoint and config parsing (pure): what
  every layer may use
* ``store/``       the TCP store, torch's TCPStore protocol (knows nothing of rendezvous):
  ``wire/`` (sans-IO codec), ``state/`` (semantics), ``base`` (``Store``, ``HashStore``,
  ``PrefixStore``), ``server/`` (``StoreServer``), ``client/`` (``TCPStore``)
* ``rendezvous/``  the static rendezvous over the store: torch's ``api`` and ``registry``,
  the ``static`` backend, its join protocol, exit barriers and failure messages
* ``api`` ``registry`` ``static`` ``client`` ``server``  aliases of the modules of the same
  name in ``rendezvous/`` and ``store/`` (the import paths torch users know)
* ``__main__``     ``python -m rdzv serve | smoke`` (``_smoke``: the smoke run)

Each subpackage's ``__init__`` lists its modules and what they may import.

Names are imported lazily, so ``import rdzv`` stays cheap (the store and the server are
imported only when used). The import line a node runs (``from rdzv import StaticTCPRendezvous``)
imports what a join needs and little else (``bench/bench_import.py``;
``tests/rdzv/test_first_join_imports.py``): no ``logging`` (see :mod:`rdzv.events`), no
``dataclasses`` (plain slotted classes), and no ``typing``: a module that needs typing's
names for annotations writes ``TYPE_CHECKING = False`` then ``if TYPE_CHECKING:`` and
imports them there; mypy and ruff read that name as typing's constant.
"""

from __future__ import annotations

import importlib

from rdzv.errors import (
    QueueEmptyError,
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousStateError,
    RendezvousTimeoutError,
    StoreBindError,
    StoreClosedError,
    StoreConnectionError,
    StoreError,
    StoreProtocolError,
    StoreTimeoutError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from rdzv.endpoint import parse_rendezvous_config, parse_rendezvous_endpoint
    from rdzv.rendezvous.api import (
        RendezvousHandler,
        RendezvousHandlerCreator,
        RendezvousInfo,
        RendezvousParameters,
        RendezvousStoreInfo,
    )
    from rdzv.rendezvous.registry import (
        RendezvousHandlerRegistry,
        create_handler,
        get_rendezvous_handler,
        rendezvous_handler_registry,
    )
    from rdzv.rendezvous.static import StaticTCPRendezvous, create_rdzv_handler
    from rdzv.store.base import HashStore, PrefixStore, Store
    from rdzv.store.client import TCPStore
    from rdzv.store.server import StoreServer

_LAZY = {
    "RendezvousHandler": "rdzv.rendezvous.api",
    "RendezvousHandlerCreator": "rdzv.rendezvous.api",
    "RendezvousInfo": "rdzv.rendezvous.api",
    "RendezvousParameters": "rdzv.rendezvous.api",
    "RendezvousStoreInfo": "rdzv.rendezvous.api",
    "TCPStore": "rdzv.store.client",
    "parse_rendezvous_config": "rdzv.endpoint",
    "parse_rendezvous_endpoint": "rdzv.endpoint",
    "RendezvousHandlerRegistry": "rdzv.rendezvous.registry",
    "create_handler": "rdzv.rendezvous.registry",
    "get_rendezvous_handler": "rdzv.rendezvous.registry",
    "rendezvous_handler_registry": "rdzv.rendezvous.registry",
    "StoreServer": "rdzv.store.server",
    "StaticTCPRendezvous": "rdzv.rendezvous.static",
    "create_rdzv_handler": "rdzv.rendezvous.static",
    "HashStore": "rdzv.store.base",
    "PrefixStore": "rdzv.store.base",
    "Store": "rdzv.store.base",
}

__all__ = [
    "HashStore",
    "PrefixStore",
    "QueueEmptyError",
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousHandler",
    "RendezvousHandlerCreator",
    "RendezvousHandlerRegistry",
    "RendezvousInfo",
    "RendezvousParameters",
    "RendezvousStateError",
    "RendezvousStoreInfo",
    "RendezvousTimeoutError",
    "StaticTCPRendezvous",
    "Store",
    "StoreBindError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreError",
    "StoreProtocolError",
    "StoreServer",
    "StoreTimeoutError",
    "TCPStore",
    "create_handler",
    "create_rdzv_handler",
    "get_rendezvous_handler",
    "parse_rendezvous_config",
    "parse_rendezvous_endpoint",
    "rendezvous_handler_registry",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rdzv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
