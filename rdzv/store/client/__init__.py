"""``TCPStore``: a client of torch's TCPStore protocol; a master also hosts a server.

Modules, lowest first; each imports only modules listed before it:

* ``_causes``     why a connect failed, in the store's words (pure)
* ``_retry``      the dial's retry schedule (pure)
* ``_transport``  one socket: deadlines, requests and replies
* ``_connect``    the dial: retries until a store answers, then the handshake
* ``_waits``      WAIT and the read pipelined behind it
* ``_requests``   one connection's requests and replies, in step, by a deadline; a GET
  whose reply is read after the replies sent before it (``HeldGet``)
* ``_extensions`` rdzv's extensions of the client: requests sent together in one write
* ``_hosting``    a master's side: the server it shares per port, the wait for workers
* ``_client``     ``TCPStore`` (torch's surface)
* ``_express``    a connection's opening exchanges made straight, driven by the caller's
  script, handed to a ``TCPStore`` at the first thing out of the ordinary (``express``)

Imports: the standard library, :mod:`rdzv.errors`, :mod:`rdzv.events`,
:mod:`rdzv.store.wire` and :mod:`rdzv.store.base`; :mod:`rdzv.store.server` only where a
master starts its server (one import inside ``TCPStore.__init__``, so a client that does
not host never imports the server), never at import time.
"""

from __future__ import annotations

from rdzv.store.client._client import TCPStore
from rdzv.store.client._express import Ended, express
from rdzv.store.client._requests import HeldGet

__all__ = ["Ended", "HeldGet", "TCPStore", "express"]
