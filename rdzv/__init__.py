"""rdzv: a static rendezvous library with torch's API and honest semantics.

Module map:

* ``errors``   the exception tree (store errors; torch's rendezvous error names)
* ``events``   structured log events the harness collects
* ``endpoint`` ``parse_rendezvous_endpoint`` / ``parse_rendezvous_config`` (pure)
* ``_wire``    sans-IO codec of torch's TCPStore wire protocol
* ``_kv``      pure store semantics: requests in, replies (incl. woken waiters) out
* ``store``    ``Store`` ABC (torch's method names), ``HashStore``, ``PrefixStore``
* ``server``   the store server: sockets <-> ``_wire`` <-> ``_kv``
* ``client``   ``TCPStore``: torch's client API, deadlines, retries
"""

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

__all__ = [
    "QueueEmptyError",
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousStateError",
    "RendezvousTimeoutError",
    "StoreBindError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreError",
    "StoreProtocolError",
    "StoreTimeoutError",
]
