"""torch's own rendezvous handlers as harness backends (imported inside node processes only).

* ``torch-static`` — torch's ``StaticTCPRendezvous``. Node 0 serves torch's TCPStore on the
  socket the harness bound for it, handed over as ``master_listen_fd`` (torch's handler has
  no parameter for it, so the node process wraps the ``TCPStore`` the handler constructs).
* ``torch-c10d`` — torch's ``DynamicRendezvousHandler`` on the C10d rendezvous backend
  (``registry.get_rendezvous_handler`` with backend ``"c10d"``: what ``torchrun
  --rdzv-backend=c10d`` builds). ``min_nodes == max_nodes ==`` the node's world size, the
  scenario's join timeout (also the store's read timeout), ``last_call_timeout`` 1 s. Only
  the node configured as rank 0 hosts the store (``is_host``: on one machine every node's
  host name matches the endpoint, so torch's own guess would make each node try), on the
  harness's socket like ``torch-static``. torch's constructor connects to the store, so the
  handler is built at the first ``next_rendezvous()``, after the start gate
  (:class:`Deferred`): connecting is part of the measured join, as it is for the other
  backends, and every node is still released at once. torch ranks the nodes itself (by host
  name, then PID): ranks are a permutation of the nodes, not their configured ranks.

torch takes whole seconds: a join timeout is rounded, at least 1 s.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "C10D_MODULE",
    "STATIC_MODULE",
    "TORCH_C10D",
    "TORCH_MODULES",
    "TORCH_STATIC",
    "Deferred",
    "HandlerArgs",
    "create_torch_handler",
    "serve_on",
    "whole_seconds",
]

TORCH_STATIC = "torch-static"
TORCH_C10D = "torch-c10d"
STATIC_MODULE = "torch.distributed.elastic.rendezvous.static_tcp_rendezvous"
C10D_MODULE = "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend"
#: What a forkserver imports once so that nodes of each torch backend start warm.
TORCH_MODULES = {
    TORCH_STATIC: [STATIC_MODULE],
    TORCH_C10D: [C10D_MODULE, "torch.distributed.elastic.rendezvous.registry"],
}
_WRAPPED = "_harness_serves_on_listen_fd"
#: c10d's wait, once every node has joined, for more nodes (``min_nodes == max_nodes``
#: completes the round at the last arrival: this only bounds a round that cannot complete).
_LAST_CALL_SECONDS = 1


def whole_seconds(timeout: float) -> int:
    """torch reads whole seconds: never round a short timeout down to "no time at all"."""
    return max(1, round(timeout))


class Deferred:
    """A handler built at the first ``next_rendezvous()`` (torch's c10d handler connects to
    its store when it is constructed: built before the start gate, a node would connect
    before the release)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self.handler: Any = None

    def next_rendezvous(self) -> Any:
        if self.handler is None:
            self.handler = self._build()
        return self.handler.next_rendezvous()

    def shutdown(self) -> bool:
        """The handler's ``shutdown()``; False when it was never built."""
        return bool(self.handler.shutdown()) if self.handler is not None else False


@dataclass(frozen=True)
class HandlerArgs:
    """What a node's handler is built from (``backends.create_handler``)."""

    endpoint: str
    run_id: str
    rank: int
    world_size: int
    timeout: float
    config: dict[str, Any]
    listen_fd: int | None


def create_torch_handler(backend: str, args: HandlerArgs) -> Any:
    """The handler of torch's ``backend`` (``torch-static`` or ``torch-c10d``) for one node.

    ``args.config`` (the scenario's per-node keys) goes to torch as its rendezvous config,
    after what the harness sets, so a scenario can override any of it; its ``timeout`` is the
    join timeout (on ``torch-static`` the scenario's join timeout wins, as it always has).
    """
    from torch.distributed.elastic.rendezvous import RendezvousParameters, registry

    endpoint, run_id, size, listen_fd = args.endpoint, args.run_id, args.world_size, args.listen_fd
    if backend == TORCH_STATIC:
        if listen_fd is not None:
            serve_on(STATIC_MODULE, listen_fd)
        settings: dict[str, Any] = {"rank": args.rank, **args.config}
        settings["timeout"] = whole_seconds(args.timeout)
        params = RendezvousParameters("static", endpoint, run_id, size, size, **settings)
        return registry.get_rendezvous_handler(params)
    if backend != TORCH_C10D:
        raise ValueError(
            f"not a torch backend: {backend!r} (expected {TORCH_STATIC!r} or {TORCH_C10D!r})"
        )
    config = dict(args.config)
    join = whole_seconds(config.pop("timeout", args.timeout))  # the harness's key: the join timeout
    settings = {
        "is_host": args.rank == 0,
        "join_timeout": join,
        "read_timeout": join,
        "last_call_timeout": _LAST_CALL_SECONDS,
        **config,
    }
    params = RendezvousParameters("c10d", endpoint, run_id, size, size, **settings)

    def build() -> Any:
        if listen_fd is not None and settings["is_host"]:
            serve_on(C10D_MODULE, listen_fd)
        return registry.get_rendezvous_handler(params)

    return Deferred(build)


def serve_on(module: str, listen_fd: int) -> None:
    """Make the store server that torch's ``module`` constructs serve on ``listen_fd`` (this
    process only)."""
    handler_module: Any = importlib.import_module(module)
    real = handler_module.TCPStore
    if getattr(real, _WRAPPED, False):
        return  # already wrapped in this process

    def tcp_store(*args: Any, **kwargs: Any) -> Any:
        is_master = kwargs.get("is_master", args[3] if len(args) > 3 else False)
        if is_master:
            kwargs["master_listen_fd"] = listen_fd
        return real(*args, **kwargs)

    setattr(tcp_store, _WRAPPED, True)
    handler_module.TCPStore = tcp_store
