"""The TCP store: torch's TCPStore protocol, its semantics, a server and a client.

Modules, lowest first; each imports only modules listed before it:

* ``_messages`` ``_wire`` ``_decoder``  sans-IO codec: requests as values, bytes, decoding
* ``_table`` ``_kv`` ``_writers``       pure semantics: the data, then sessions and waiters,
  then which connection last wrote a watched key (no I/O, no clock: ``now`` is passed in)
* ``_fast``                            the server's fast path: the frequent requests served
  from the received bytes onto the table, with the semantics above (no I/O)
* ``_convert`` ``base``                 torch's ``Store`` ABC, ``HashStore``, ``PrefixStore``
* ``_bind`` ``_droplog`` ``_loop`` ``_bounds`` ``_conn`` ``server``  ``StoreServer``: the only
  server-side I/O (a poller loop, the bounds on what connections hold, the connections on
  it, the server)
* ``_transport`` ``_connect`` ``_waits`` ``_hosting`` ``client``  ``TCPStore``: deadlines,
  retries, pipelining; a master hosts a ``StoreServer``

Imports: the standard library, :mod:`rdzv.errors` and :mod:`rdzv.events`, never
:mod:`rdzv.rendezvous` (the store knows nothing of rendezvous). ``Store``, ``HashStore``
and ``PrefixStore`` are importable from here, as they were from the ``rdzv.store`` module.
"""

from __future__ import annotations

from rdzv.store.base import HashStore, PrefixStore, Store

__all__ = ["HashStore", "PrefixStore", "Store"]
