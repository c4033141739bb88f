"""rdzv: a static rendezvous library with torch's API and honest semantics.

Switch from torch with one import::

    # from torch.distributed.elastic.rendezvous import RendezvousParameters
    # from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler
    from rdzv import RendezvousParameters, get_rendezvous_handler

Module map:

* ``errors``         the exception tree (store errors; torch's rendezvous error names)
* ``events``         structured log events the harness collects
* ``endpoint``       ``parse_rendezvous_endpoint`` / ``parse_rendezvous_config`` (pure)
* ``_wire``          sans-IO codec of torch's TCPStore wire protocol: messages, encoders, readers
* ``_decoder``       incremental, bounded decoding of requests (the server side of ``_wire``)
* ``_kv``            pure store semantics: requests in, replies (incl. woken waiters) out
* ``store``          ``Store`` ABC (torch's method names), ``HashStore``, ``PrefixStore``
* ``server``         the store server: sockets <-> ``_wire`` <-> ``_kv``
* ``_transport``     one client connection: deadline-bounded sends and framed reads
* ``_connect``       resolve, connect with retries, handshake
* ``_waits``         a blocking WAIT, its CANCEL_WAIT and the request behind it
* ``client``         ``TCPStore``: torch's client API, deadlines, retries
* ``api``            torch's ``RendezvousHandler`` ABC, parameters, info classes
* ``registry``       backend name -> handler factory (``static`` + entry-point plugins)
* ``static``         ``StaticTCPRendezvous``: the static backend
* ``_static_config`` option validation; ``_round_state`` keys, identities, verdicts;
  ``_join`` the join protocol

Names are imported lazily, so ``import rdzv`` stays cheap (no asyncio until a store or a
server is used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from rdzv.api import (
        RendezvousHandler,
        RendezvousHandlerCreator,
        RendezvousInfo,
        RendezvousParameters,
        RendezvousStoreInfo,
    )
    from rdzv.client import TCPStore
    from rdzv.endpoint import parse_rendezvous_config, parse_rendezvous_endpoint
    from rdzv.registry import (
        RendezvousHandlerRegistry,
        create_handler,
        get_rendezvous_handler,
        rendezvous_handler_registry,
    )
    from rdzv.server import StoreServer
    from rdzv.static import StaticTCPRendezvous, create_rdzv_handler
    from rdzv.store import HashStore, PrefixStore, Store

_LAZY = {
    "RendezvousHandler": "rdzv.api",
    "RendezvousHandlerCreator": "rdzv.api",
    "RendezvousInfo": "rdzv.api",
    "RendezvousParameters": "rdzv.api",
    "RendezvousStoreInfo": "rdzv.api",
    "TCPStore": "rdzv.client",
    "parse_rendezvous_config": "rdzv.endpoint",
    "parse_rendezvous_endpoint": "rdzv.endpoint",
    "RendezvousHandlerRegistry": "rdzv.registry",
    "create_handler": "rdzv.registry",
    "get_rendezvous_handler": "rdzv.registry",
    "rendezvous_handler_registry": "rdzv.registry",
    "StoreServer": "rdzv.server",
    "StaticTCPRendezvous": "rdzv.static",
    "create_rdzv_handler": "rdzv.static",
    "HashStore": "rdzv.store",
    "PrefixStore": "rdzv.store",
    "Store": "rdzv.store",
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
