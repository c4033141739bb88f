"""Deliberately broken rendezvous backends for ``harness fuzz`` tests (``module:factory``).

``eager`` skips the join barrier: each node connects to the shared store (node 0 hosts it)
and returns its configured rank at once, without waiting for anybody. With every node
present and configured right that looks healthy (distinct ranks 0..N-1, one world size, a
store everyone shares), so only faults expose it: an absent node (the others return in a
round it never joined), a duplicate rank, a world-size mismatch. ``stubborn`` is ``eager``
whose shutdown fails. The node processes import
this module by name, so its folder must be on their ``PYTHONPATH``.
"""

from __future__ import annotations

from typing import Any

from rdzv import PrefixStore, TCPStore
from rdzv.endpoint import parse_rendezvous_endpoint


class _EagerHandler:
    def __init__(self, params: Any) -> None:
        self.params = params
        self.rank = int(params.config["rank"])
        self.store: TCPStore | None = None

    def next_rendezvous(self) -> tuple[PrefixStore, int, int]:
        host, port = parse_rendezvous_endpoint(self.params.endpoint, -1)
        self.store = TCPStore(
            host,
            port,
            None,
            self.rank == 0,
            float(self.params.config["timeout"]),
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=self.params.config.get("listen_fd"),
        )
        return (PrefixStore(self.params.run_id, self.store), self.rank, self.params.max_nodes)

    def shutdown(self) -> bool:
        if self.store is not None:
            self.store.close()
        return True


def eager(params: Any) -> _EagerHandler:
    """A handler that returns without waiting for the other nodes."""
    return _EagerHandler(params)


class _StubbornHandler(_EagerHandler):
    def shutdown(self) -> bool:
        super().shutdown()
        raise RuntimeError(f"rank {self.rank} refuses to shut down")


def stubborn(params: Any) -> _StubbornHandler:
    """``eager``, whose ``shutdown()`` raises once it has closed its store."""
    return _StubbornHandler(params)


class _OfflineHandler:
    def __init__(self, params: Any) -> None:
        self.rank = int(params.config["rank"])

    def next_rendezvous(self) -> Any:
        raise RuntimeError(f"offline rank {self.rank} never touches the network")

    def shutdown(self) -> bool:
        return True


def offline(params: Any) -> _OfflineHandler:
    """A handler that fails at once without touching the network (so it reports no
    connection attempts)."""
    return _OfflineHandler(params)


def broken(params: Any) -> _OfflineHandler:
    """A factory that raises: the handler cannot even be built."""
    raise ValueError(f"broken factory: rank {params.config['rank']} gets no handler")
