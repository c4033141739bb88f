"""What gives each scenario run the Toxiproxy API its links are on.

A :data:`ProxyProvider` is called once per run whose world's links are on the run's proxy
(:attr:`~harness.world.kinds.WorldKind.proxied`: the local and packed worlds); a run in a
world without (netns, ray) is handed none, and nothing is started for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient

__all__ = ["ProxyProvider", "embedded_proxy", "shared_proxy"]

#: Gives each scenario run the Toxiproxy API it drives, for the duration of the run.
ProxyProvider = Callable[[], AbstractContextManager[ToxiproxyClient]]


@contextlib.contextmanager
def embedded_proxy() -> Iterator[ToxiproxyClient]:
    """A fresh embedded Toxiproxy-API server for one run: its seed (set by the run) then
    governs that run's toxics alone, however many scenarios run at once."""
    with ToxiproxyServer() as server:
        yield ToxiproxyClient(server.host, server.port)


def shared_proxy(client: ToxiproxyClient) -> ProxyProvider:
    """Every run drives ``client``'s server (a real Toxiproxy: its seed does nothing)."""
    return lambda: contextlib.nullcontext(client)
