"""``StoreServer``: the only server-side I/O of the store, on a poller loop of its own.

Modules, lowest first; each imports only modules listed before it:

* ``_bind``     where a server listens: the bind plan of a host, binding, adopting a
  listening descriptor
* ``_droplog``  the log of dropped connections: the first in full, then a summary (pure)
* ``_loop``     ``EventLoop``: an epoll/poll loop with timers, on a thread of its own
* ``_bounds``   the bounds on what connections hold (buffers, a stalled request)
* ``_descriptors`` the process's descriptors: the limit raised, the table grown ahead
* ``_conn``     one accepted connection: reads, the fast path, the KV, replies
* ``_server``   ``StoreServer``: the listeners, the connections, the writer watches

Imports: the standard library, :mod:`rdzv.errors`, :mod:`rdzv.events`,
:mod:`rdzv.store.wire` and :mod:`rdzv.store.state`; never :mod:`rdzv.store.client`.

The API (what :mod:`rdzv.rendezvous` and users may use; docs/store.md): ``StoreServer``
(``watch_writers`` and the types of its callbacks: ``Selects``, ``OnClose``, ``OnWrite``,
``Cancel``), ``PARTIAL_REQUEST_TIMEOUT``, ``BUFFER_BUDGET``, ``bind_plan`` and
``listen_ahead`` (a listening socket made before the server is imported, for it to adopt).
Importing this package imports ``_bind`` only: the rest is imported on first use (a hosting
node listens before it imports the server, and a node that does not host never imports it).
"""

from __future__ import annotations

from rdzv.store.server._bind import bind_plan, listen_ahead

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdzv.store.server._server import BUFFER_BUDGET, PARTIAL_REQUEST_TIMEOUT, StoreServer
    from rdzv.store.state._writers import Cancel, OnClose, OnWrite, Selects

__all__ = [
    "BUFFER_BUDGET",
    "PARTIAL_REQUEST_TIMEOUT",
    "Cancel",
    "OnClose",
    "OnWrite",
    "Selects",
    "StoreServer",
    "bind_plan",
    "listen_ahead",
]

_LAZY = frozenset(set(__all__) - {"bind_plan", "listen_ahead"})


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rdzv.store.server import _server

    value = getattr(_server, name)
    globals()[name] = value
    return value
