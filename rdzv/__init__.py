"""rdzv: a static rendezvous library with torch's API and honest semantics.

Module map:

* ``errors``   the exception tree (store errors; torch's rendezvous error names)
* ``events``   structured log events the harness collects
* ``endpoint`` ``parse_rendezvous_endpoint`` / ``parse_rendezvous_config`` (pure)
* ``_wire``    sans-IO codec of torch's TCPStore wire protocol
* ``_kv``      pure store semantics: requests in, replies (incl. woken waiters) out
* ``store``    ``Store`` ABC (torch's method names), ``HashStore``, ``PrefixStore``
* ``server``   the store server: sockets <-> ``_wire`` <-> ``_kv``
* ``_transport`` client-side I/O: resolve, connect with retries, handshake, framed reads
* ``client``   ``TCPStore``: torch's client API, deadlines, retries
"""

from rdzv.client import TCPStore
from rdzv.endpoint import parse_rendezvous_config, parse_rendezvous_endpoint
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
from rdzv.server import StoreServer
from rdzv.store import HashStore, PrefixStore, Store

__all__ = [
    "HashStore",
    "PrefixStore",
    "QueueEmptyError",
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousStateError",
    "RendezvousTimeoutError",
    "Store",
    "StoreBindError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreError",
    "StoreProtocolError",
    "StoreServer",
    "StoreTimeoutError",
    "TCPStore",
    "parse_rendezvous_config",
    "parse_rendezvous_endpoint",
]
