"""rdzv as torchrun's rendezvous backend: ``torchrun --rdzv-backend=rdzv``.

The only module of rdzv that imports torch. torchrun finds it through the entry point
``rdzv`` of the group ``torchrun.handlers`` (see ``pyproject.toml``): torch loads the entry
point, calls it with no arguments (:func:`handler_creator`) and registers what it returns
as the creator of the backend ``rdzv``. ``import rdzv`` never imports this module.

Usage (every node; node 0 hosts the store at the endpoint)::

    torchrun --rdzv-backend=rdzv --rdzv-endpoint=HOST:PORT --nnodes=N --node-rank=K \\
        --nproc-per-node=P train.py

What the adapter adds to :class:`rdzv.StaticTCPRendezvous` (docs/torchrun.md is the user's
account):

* **The node rank.** torchrun hands ``--node-rank`` only to its backend named ``static``.
  Here the rank comes from ``--rdzv-conf rank=K`` when given, else from torchrun's own
  ``--node-rank`` (or ``PET_NODE_RANK``, its environment twin), read from the agent's
  command line with torchrun's own parser. torchrun then warns that it ignores node_rank
  for another backend: rdzv reads it, and its ``rank_source`` event says where the rank
  came from.
* **A store per round.** Every ``next_rendezvous()`` is a new rdzv round. The first is
  served on the endpoint's own store (rdzv's keys live under a prefix of their own), so a
  job that never restarts uses the endpoint's port alone, as a firewall that opens only
  that port expects. Every later round (a restart) is served by node 0 on a store of its
  own (a new listening port, bound to port 0 and read back). The agents' store and the
  workers' store (``MASTER_ADDR``/``MASTER_PORT``, torch's ``use_agent_store``) are that
  round's store, so a restarted worker group never reads the keys of an earlier attempt
  (its store-based barrier, its gloo addresses): torch's own backends keep one store for
  every attempt, and a restart then reads stale keys. A later round's port is published in
  the run's rdzv store; node 0 closes a round's store when a later round completes, and
  all of them at ``shutdown()``.
* **torch's types.** torch's ``RendezvousParameters`` are converted; rdzv's errors are
  raised as torch's classes of the same name (``raise ... from`` the rdzv error), so the
  elastic agent handles them as its own; the returned store is a torch ``TCPStore``.
* **Its events in torchrun's log.** rdzv's events (``joined``, ``complete``,
  ``member_lost``, ``exit_wait_ended``, ...) are logged on
  ``torch.distributed.elastic.rendezvous.rdzv``, where torchrun's log shows them.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from torch.distributed import TCPStore  # type: ignore[attr-defined, unused-ignore]
from torch.distributed.elastic.rendezvous import api as torch_api

from rdzv import errors as rdzv_errors
from rdzv.events import COPY_ATTR
from rdzv.rendezvous.api import RendezvousParameters
from rdzv.rendezvous.static import StaticTCPRendezvous
from rdzv.store.server import StoreServer

__all__ = [
    "BACKEND",
    "TORCH_LOGGER",
    "TorchrunRendezvous",
    "create_handler",
    "handler_creator",
    "node_rank_from_torchrun",
]

BACKEND = "rdzv"
#: The logger rdzv's events are re-logged on inside torchrun.
TORCH_LOGGER = "torch.distributed.elastic.rendezvous.rdzv"
_PORT_KEY = "torchrun/round/{round}/port"

# rdzv's error classes -> torch's, most specific first.
_ERRORS: tuple[tuple[type[Exception], type[Exception]], ...] = (
    (rdzv_errors.RendezvousGracefulExitError, torch_api.RendezvousGracefulExitError),
    (rdzv_errors.RendezvousClosedError, torch_api.RendezvousClosedError),
    (rdzv_errors.RendezvousTimeoutError, torch_api.RendezvousTimeoutError),
    (rdzv_errors.RendezvousConnectionError, torch_api.RendezvousConnectionError),
    (rdzv_errors.RendezvousStateError, torch_api.RendezvousStateError),
    (rdzv_errors.RendezvousError, torch_api.RendezvousError),
)


def handler_creator() -> Callable[[torch_api.RendezvousParameters], torch_api.RendezvousHandler]:
    """The entry point torchrun calls (no arguments): returns the backend's creator."""
    _forward_events()
    return create_handler


def create_handler(params: torch_api.RendezvousParameters) -> TorchrunRendezvous:
    """Make the handler torchrun asked for with ``--rdzv-backend``.

    Raises:
        ValueError: no node rank (naming the flags that give one), or a bad option, endpoint
            or world size (rdzv's messages, naming the option and the value).
    """
    config = dict(params.config)
    source = "--rdzv-conf rank"
    if config.get("rank") is None:
        rank, source = node_rank_from_torchrun()
        if rank is None:
            raise ValueError(
                " ".join(
                    (
                        "the rdzv rendezvous backend needs this node's rank and torchrun",
                        "passes --node-rank only to its 'static' backend: give it as",
                        "--node-rank=K (rdzv reads torchrun's command line) or",
                        f"--rdzv-conf rank=K, K in 0..{params.max_nodes - 1}.",
                    )
                )
            )
        config["rank"] = rank
    ours = RendezvousParameters(
        backend=params.backend,
        endpoint=params.endpoint,
        run_id=params.run_id,
        min_nodes=params.min_nodes,
        max_nodes=params.max_nodes,
        local_addr=params.local_addr,
        **config,
    )
    handler = TorchrunRendezvous(StaticTCPRendezvous(ours), params.backend)
    logging.getLogger(TORCH_LOGGER).info(
        "rank_source: rank %s of %s from %s (run '%s', endpoint %s)",
        handler.rank,
        params.max_nodes,
        source,
        params.run_id,
        params.endpoint,
    )
    return handler


def node_rank_from_torchrun(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> tuple[int | None, str]:
    """This node's rank as torchrun was given it: ``PET_NODE_RANK``, else ``--node-rank``
    on the agent's command line (parsed by torchrun's own parser); (None, "") if neither.

    Raises:
        ValueError: the value given is not an integer.
    """
    environ = os.environ if environ is None else environ
    value = environ.get("PET_NODE_RANK")
    if value is not None:
        try:
            return int(value), "PET_NODE_RANK"
        except ValueError:
            raise ValueError(
                f"PET_NODE_RANK={value!r} (torchrun's --node-rank) is not an integer rank."
            ) from None
    args = sys.argv[1:] if argv is None else argv
    if not any(a.split("=", 1)[0] in ("--node-rank", "--node_rank") for a in args):
        return None, ""
    from torch.distributed.run import get_args_parser

    parsed, _ = get_args_parser().parse_known_args(args)
    return int(parsed.node_rank), "torchrun's --node-rank"


class TorchrunRendezvous(torch_api.RendezvousHandler):  # type: ignore[misc, unused-ignore]
    """torch's ``RendezvousHandler`` over :class:`rdzv.StaticTCPRendezvous` (module doc).

    Args:
        handler: the rdzv handler (made from the converted parameters).
        backend: the backend name torchrun was given (torchrun checks
            :meth:`get_backend` against it).
    """

    def __init__(self, handler: StaticTCPRendezvous, backend: str = BACKEND) -> None:
        self._rdzv = handler
        self._backend = backend
        self._servers: dict[int, StoreServer] = {}  # node 0: the rounds' stores
        self._lock = threading.Lock()

    @property
    def rank(self) -> int:
        """This node's rank."""
        return self._rdzv.rank

    @property
    def rdzv_handler(self) -> StaticTCPRendezvous:
        """The rdzv handler underneath."""
        return self._rdzv

    def get_backend(self) -> str:
        return self._backend

    @property
    def use_agent_store(self) -> bool:
        """True: the workers use the round's store (``MASTER_ADDR``/``MASTER_PORT``)."""
        return True

    def next_rendezvous(self) -> torch_api.RendezvousInfo:
        cfg = self._rdzv.config
        round_index = self._rdzv.next_round
        if round_index == 0:  # the first round: the endpoint's own store, no other port
            with _translated():
                first = self._rdzv.next_rendezvous()
            where = first.bootstrap_store_info
            return self._round_info(round_index, cfg.port if where is None else where.master_port)
        server = None
        if cfg.start_daemon:
            try:
                server = StoreServer(cfg.host, 0, expected_clients=cfg.world_size).start()
            except rdzv_errors.StoreError as exc:  # out of ports or descriptors
                raise torch_api.RendezvousConnectionError(
                    f"rank {cfg.rank}: node 0 could not open round {round_index}'s store: {exc}"
                ) from exc
        try:
            with _translated():
                info = self._rdzv.next_rendezvous()
            port = self._round_port(info.store, round_index, server)
        except BaseException:
            if server is not None:
                server.close()
            raise
        if server is not None:
            self._keep(round_index, server)
        return self._round_info(round_index, port)

    def _round_info(self, round_index: int, port: int) -> torch_api.RendezvousInfo:
        """torch's view of a completed round whose store listens on ``port`` of node 0."""
        cfg = self._rdzv.config
        try:
            store = TCPStore(
                cfg.host, port, is_master=False, timeout=cfg.read_timeout, wait_for_workers=False
            )
        except Exception as exc:  # torch's DistNetworkError, DistStoreError, ...
            raise torch_api.RendezvousConnectionError(
                f"rank {cfg.rank}: round {round_index} completed, but its store at"
                f" {cfg.host}:{port} (served by node 0) could not be reached: {exc}"
            ) from exc
        return torch_api.RendezvousInfo(
            store, cfg.rank, cfg.world_size, torch_api.RendezvousStoreInfo(cfg.host, port)
        )

    def _round_port(self, store: Any, round_index: int, server: StoreServer | None) -> int:
        """The port of round ``round_index``'s store: published by node 0, read by the others
        (a blocking get, bounded by ``read_timeout``)."""
        key = _PORT_KEY.format(round=round_index)
        try:
            if server is not None:
                store.set(key, str(server.port))
                return server.port
            return int(store.get(key))
        except rdzv_errors.StoreError as exc:
            cfg = self._rdzv.config
            raise torch_api.RendezvousConnectionError(
                f"rank {cfg.rank}: round {round_index} completed, but its store's port could not"
                f" be {'published' if server is not None else 'read from node 0'} on the"
                f" rendezvous store at {cfg.endpoint}: {exc}"
            ) from exc

    def is_closed(self) -> bool:
        with _translated():
            return self._rdzv.is_closed()

    def set_closed(self) -> None:
        with _translated():
            self._rdzv.set_closed()

    def num_nodes_waiting(self) -> int:
        with _translated():
            return self._rdzv.num_nodes_waiting()

    def get_run_id(self) -> str:
        return self._rdzv.get_run_id()

    def shutdown(self) -> bool:
        """rdzv's exit barrier (:meth:`rdzv.StaticTCPRendezvous.shutdown`), then the rounds'
        stores (node 0)."""
        done = self._rdzv.shutdown()
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()
        return done

    def _keep(self, round_index: int, server: StoreServer) -> None:
        """Keep round ``round_index``'s store; close the earlier rounds' (every agent has
        moved on: this round completed)."""
        with self._lock:
            old = [s for r, s in self._servers.items() if r < round_index]
            self._servers = {round_index: server}
        for stale in old:
            stale.close()


@contextmanager
def _translated() -> Iterator[None]:
    """rdzv's rendezvous errors as torch's classes of the same name."""
    try:
        yield
    except rdzv_errors.RendezvousError as exc:
        for ours, theirs in _ERRORS:
            if isinstance(exc, ours):
                raise theirs(str(exc)) from exc
        raise


class _ToTorchLog(logging.Handler):
    """Re-logs rdzv's records on torch's elastic logger, where torchrun shows them (the
    origin, rdzv's module and line, kept)."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__(level=logging.DEBUG)
        self._target = target

    def emit(self, record: logging.LogRecord) -> None:
        target = self._target
        if target.isEnabledFor(record.levelno):
            copy = logging.makeLogRecord(record.__dict__)
            copy.name = target.name
            setattr(copy, COPY_ATTR, True)  # rdzv's own handlers saw the original
            target.handle(copy)


_forward_lock = threading.Lock()


def _forward_events() -> None:
    """Once per process: rdzv's records go to :data:`TORCH_LOGGER` too, at torchrun's level
    (``LOGLEVEL``, WARNING by default: ``LOGLEVEL=INFO`` shows every event)."""
    from torch.distributed.elastic.utils.logging import get_logger

    with _forward_lock:
        top = logging.getLogger("rdzv")
        if any(isinstance(h, _ToTorchLog) for h in top.handlers):
            return
        target = get_logger(TORCH_LOGGER)
        if top.level == logging.NOTSET or top.level > target.getEffectiveLevel():
            top.setLevel(target.getEffectiveLevel())
        top.addHandler(_ToTorchLog(target))
