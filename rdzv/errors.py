"""The whole rdzv exception tree.

Who is at fault is part of the class: local misuse raises ``ValueError``/``TypeError``;
a remote peer that breaks the protocol raises :class:`StoreProtocolError`; the network or a
vanished server raises a :class:`ConnectionError` subclass; a deadline raises a
:class:`TimeoutError` subclass. Every store error is also a ``RuntimeError`` so code written
for torch (whose ``DistStoreError``/``DistNetworkError`` derive from ``RuntimeError``) keeps
catching them.

::

    Exception
    ├── RendezvousError                          (torch: same name)
    │   ├── RendezvousClosedError
    │   ├── RendezvousTimeoutError      + TimeoutError
    │   ├── RendezvousConnectionError   + ConnectionError
    │   ├── RendezvousStateError
    │   └── RendezvousGracefulExitError
    └── RuntimeError
        └── StoreError                           (torch: DistError / DistStoreError)
            ├── StoreTimeoutError       + TimeoutError     get/wait/barrier deadline passed
            ├── StoreConnectionError    + ConnectionError  (torch: DistNetworkError)
            │   ├── StoreClosedError                       the server shut down or vanished
            │   └── StoreBindError                         the server could not listen
            ├── StoreProtocolError                         the peer is not a store / sent junk
            └── QueueEmptyError                            non-blocking pop on an empty queue
"""

from __future__ import annotations

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


class RendezvousError(Exception):
    """Base of every rendezvous error (torch's name)."""


class RendezvousClosedError(RendezvousError):
    """The rendezvous has been closed; no further rounds will run."""


class RendezvousTimeoutError(RendezvousError, TimeoutError):
    """The rendezvous did not complete before its deadline."""


class RendezvousConnectionError(RendezvousError, ConnectionError):
    """The connection to the rendezvous backend failed."""


class RendezvousStateError(RendezvousError):
    """The rendezvous state is corrupt or belongs to another round."""


class RendezvousGracefulExitError(RendezvousError):
    """This node is not part of the rendezvous and should exit; not a failure."""


class StoreError(RuntimeError):
    """Base of every key-value store error."""


class StoreTimeoutError(StoreError, TimeoutError):
    """A blocking store operation passed its deadline; the message names the keys."""


class StoreConnectionError(StoreError, ConnectionError):
    """The store could not be reached, or the connection to it was lost.

    Attributes:
        connect_cause: when no store could be reached at connect time, what the last
            connection attempt met: ``"refused"`` (nothing listens there), ``"no answer"``
            (nothing came back at all: a firewall that drops, or the host is down), ``"no
            route"``, ``"reset"`` (something on the path), ``"unresolvable"`` (the host
            name), ``"not a store"`` (something else answered there); else None.
    """

    connect_cause: str | None = None


class StoreClosedError(StoreConnectionError):
    """The connection to the store is gone (or was closed after an earlier failure).

    Attributes:
        seen: what this client observed on the connection: ``"eof"`` (the store closed it
            cleanly), ``"reset"`` (a reset: the host's process or something on the network
            path aborted it), ``"broken"`` (a send found it already broken), ``"error"``
            (another OS error), ``"shutdown"`` (the store said it was shutting down), or
            None (this client closed it itself: a deadline, junk, ``close()``).
    """

    seen: str | None = None


class StoreBindError(StoreConnectionError):
    """The store server could not listen on the requested address.

    Attributes:
        host: the host the server tried to bind.
        port: the port it tried to bind.
        errno: the OS error number (``errno.EADDRINUSE`` for a port in use).
    """

    def __init__(self, message: str, *, host: str, port: int, errno: int | None) -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.errno = errno


class StoreProtocolError(StoreError):
    """The peer broke the TCPStore protocol (it is probably not a store)."""


class QueueEmptyError(StoreError):
    """A non-blocking ``queue_pop`` found the queue empty."""
