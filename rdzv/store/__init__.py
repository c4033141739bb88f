"""The TCP store: torch's TCPStore protocol, its semantics, a server and a client.

Subpackages and modules, lowest first; each imports only those listed before it, except
that ``server/`` and ``client/`` never import each other (a master ``TCPStore`` imports the
server once, inside ``__init__``):

* ``wire/``     the sans-IO codec of torch's TCPStore protocol: requests as values, bytes,
  decoding; keys, values and timeouts converted once
* ``state/``    the store's semantics (no I/O, no clock: ``now`` is passed in): the data,
  sessions and waiters, writer watches, the server's fast path
* ``base``      torch's ``Store`` ABC, ``HashStore``, ``PrefixStore``: the API every store has
* ``server/``   ``StoreServer``: the only server-side I/O (binding, a poller loop, the bounds
  on what connections hold, the connections, the server)
* ``client/``   ``TCPStore``: deadlines, retries, pipelining; a master hosts a ``StoreServer``

Each subpackage's ``__init__`` lists its modules and what they may import. The public
modules are ``base``, ``server`` and ``client`` (and this package): what other packages of
rdzv use, :mod:`rdzv.rendezvous` included; the underscore modules are the store's own.

Imports: the standard library, :mod:`rdzv.errors` and :mod:`rdzv.events`, never
:mod:`rdzv.rendezvous` (the store knows nothing of rendezvous). ``Store``, ``HashStore``
and ``PrefixStore`` are importable from here, as they were from the ``rdzv.store`` module.
"""

from __future__ import annotations

from rdzv.store.base import HashStore, PrefixStore, Store

__all__ = ["HashStore", "PrefixStore", "Store"]
