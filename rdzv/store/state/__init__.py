"""The store's semantics, without I/O or a clock (``now`` is passed in).

Modules, lowest first; each imports only modules listed before it:

* ``_table``    the data: keys, values, torch's integer and queue rules
* ``_kv``       sessions and waiters over the table: a request in, replies out
  (``KV.feed(conn, requests, now)``)
* ``_writers``  ``WatchingKV``: which connection last changed a watched key, and
  callbacks when it closes (the writer watch :class:`rdzv.store.server.StoreServer` offers)
* ``_fast``     the server's fast path: the frequent requests served from the received
  bytes onto the table, with the semantics above

Imports: the standard library (no socket, no clock), :mod:`rdzv.errors`,
:mod:`rdzv.events` and :mod:`rdzv.store.wire`. Empty on purpose: importing the package
costs nothing.
"""
