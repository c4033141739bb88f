"""The fault proxy: a TCP proxy speaking Toxiproxy's HTTP API, and a typed client for it.

* ``toxics``    toxics as Toxiproxy's API describes them: names, attributes, validation
* ``stages``    what each toxic does to a link's bytes, in virtual time (pure)
* ``relay``     one proxied connection: two sockets, two links, toxic stages
* ``proxies``   one proxy: listener (its port kept while disabled), chains, connections
* ``collection`` all proxies of a server: create, populate, delete, reset; seed, event log
* ``events``    the proxy's bounded event log (which toxic acted, when) and its readers
* ``loop``      the proxy's event loop (stdlib asyncio, sub-millisecond timers)
* ``netaddr``   ``host:port`` parsing and listening sockets, with Go-style errors
* ``api``       the Toxiproxy-compatible HTTP control plane: ``ToxiproxyServer``
* ``api_json``  JSON bodies in and out of the control plane, as Toxiproxy reads and writes them
* ``bulk_api``  the bulk extension: one request acts on many proxies
* ``bulk_client`` ``client.bulk``: many proxies in one call (falls back to one per request)
* ``server``    the embedded proxy as a standalone server (``harness proxy``, ``-m harness.proxy``)
* ``process``   the embedded proxy in a process of its own (more links than one holds)
* ``client_errors`` the errors a client call ends in: the server's refusal, no answer
* ``client``    ``ToxiproxyClient``: one typed client, whichever server is behind it
* ``info``      proxies and toxics as a server reports them (typed values)
* ``address``   a Toxiproxy API address as users write it (``HOST:PORT``)

Imports: :mod:`harness.errors` and the standard library (plus aiohttp, requests,
toxiproxy-python). The proxy knows nothing of nodes, worlds, scenarios or reports.
"""
