"""The ``static`` backend: a fixed-size rendezvous at a pre-agreed ``host:port``.

Node 0 (by default; see ``start_daemon``) hosts a TCP store; every node dials it, claims its
own rank and waits until all ``world_size`` ranks have joined the round. Drop-in for
``torch.distributed.elastic.rendezvous.static_tcp_rendezvous`` (same names and constructor),
with honest semantics (the join protocol is described in :mod:`rdzv.rendezvous._join`, how a
node runs its rounds in :mod:`rdzv.rendezvous._node`):

* ``next_rendezvous()`` returns on every node only when every rank has joined;
* a missing node fails every present node at the deadline, naming the missing ranks;
* a duplicate rank or a world-size mismatch fails every node at once, naming both sides;
  a restarted node (same machine, same rank, its predecessor dead) takes over its claim;
* a node that loses its store connection mid-join tells the others (over a fresh
  connection), so they fail at once instead of at their deadline;
* a round never completes with a dead member: a member that vanishes mid-round (its store
  connection closes) holds the round, and if it is not restarted within a short grace the
  round fails on every node at once, naming it, and on nodes that arrive later within the
  join timeout too (the hosting node sees the connection close and decides completion; see
  :mod:`rdzv.rendezvous._lost_member`);
* a port in use fails node 0 at once; the others fail at their deadline saying that no
  rendezvous server answered (or that what answered is not a rendezvous store), and so does
  a node that arrives after node 0 has exited;
* the hosting node returns only after every node read the result, and its ``shutdown()``
  only after every node left (exit barriers); a member whose connection closed or whose
  process died is not waited for, a silent one 10 s past the last one heard of (see
  :mod:`rdzv.rendezvous._departures`), and a member lost after the round completed does not
  undo it;
* ``set_closed``/``is_closed``/``num_nodes_waiting`` work through the store for every node.

Events on the ``rdzv.rendezvous`` logger (see :mod:`rdzv.events`), each with ``run_id``,
``round``, ``rank``, ``endpoint`` and, except the ``member_*`` ones, ``elapsed`` (seconds
since the call started): ``join_start``, ``joined``, ``complete``, ``failed``, ``closed``,
``shutdown``, ``linger_ended``, ``claim_taken_over``, ``failure_published`` /
``failure_not_published``, ``member_vanished``, ``member_lost`` /
``member_loss_not_reported``, ``read_wait_ended``, ``exit_wait`` /
``exit_wait_ended``; their fields are listed in
docs/rendezvous.md ("Events"). The store client reports connect attempts
(``connect_attempt`` / ``connected`` on ``rdzv.client``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from rdzv.errors import RendezvousClosedError, RendezvousConnectionError, StoreError
from rdzv.rendezvous._node import Node
from rdzv.rendezvous._round_state import closed_record
from rdzv.rendezvous._static_config import (
    DEFAULT_TIMEOUT,
    StaticConfig,
    config_from_arguments,
    config_from_params,
)
from rdzv.rendezvous.api import (
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStoreInfo,
)
from rdzv.store.base import PrefixStore

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final, overload

__all__ = ["StaticTCPRendezvous", "create_handler", "create_rdzv_handler"]

BACKEND: Final = "static"


def _msg(*parts: str) -> str:
    return " ".join(parts)


class StaticTCPRendezvous(RendezvousHandler):
    """A static rendezvous over node 0's TCP store (torch's class, honest semantics).

    Two constructor forms::

        StaticTCPRendezvous(params)                      # a RendezvousParameters
        StaticTCPRendezvous(master_addr, master_port, rank, world_size, run_id, timeout)

    The second form also takes ``read_timeout``, ``start_daemon`` and ``listen_fd`` as
    keywords (see :mod:`rdzv.rendezvous._static_config` for every option). Nothing touches
    the network before :meth:`next_rendezvous`.

    Raises:
        ValueError: a bad option, rank, port or timeout (naming the option and the value).
        TypeError: ``master_addr`` is neither a str nor a ``RendezvousParameters``.
    """

    if TYPE_CHECKING:  # the overloads, for type checkers only (no typing at import)

        @overload
        def __init__(self, master_addr: RendezvousParameters) -> None: ...

        @overload
        def __init__(
            self,
            master_addr: str,
            master_port: int,
            rank: int,
            world_size: int,
            run_id: str,
            timeout: float | timedelta = ...,
            *,
            read_timeout: float | timedelta | None = None,
            start_daemon: bool | None = None,
            listen_fd: int | None = None,
        ) -> None: ...

    def __init__(
        self,
        master_addr: str | RendezvousParameters,
        master_port: int | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        run_id: str | None = None,
        timeout: float | timedelta = DEFAULT_TIMEOUT,
        *,
        read_timeout: float | timedelta | None = None,
        start_daemon: bool | None = None,
        listen_fd: int | None = None,
    ) -> None:
        if isinstance(master_addr, RendezvousParameters):
            self._cfg = config_from_params(master_addr)
        elif isinstance(master_addr, str):
            self._cfg = config_from_arguments(
                master_addr,
                master_port,
                rank,
                world_size,
                run_id,
                {
                    "rank": rank,
                    "timeout": timeout,
                    "read_timeout": read_timeout,
                    "start_daemon": start_daemon,
                    "listen_fd": listen_fd,
                },
            )
        else:
            raise TypeError(
                _msg(
                    "StaticTCPRendezvous takes a RendezvousParameters or (master_addr,",
                    "master_port, rank, world_size, run_id, timeout); got",
                    f"{type(master_addr).__name__} {master_addr!r}.",
                )
            )
        self._node = Node(self._cfg)
        self._closed_here = False
        self._shut_down = False

    # torch's public attributes, read-only here.
    @property
    def master_addr(self) -> str:
        """The store host every node dials."""
        return self._cfg.host

    @property
    def master_port(self) -> int:
        """The store port."""
        return self._cfg.port

    @property
    def rank(self) -> int:
        """This node's rank."""
        return self._cfg.rank

    @property
    def world_size(self) -> int:
        """The fixed number of nodes per round."""
        return self._cfg.world_size

    @property
    def run_id(self) -> str:
        """The run id."""
        return self._cfg.run_id

    @property
    def timeout(self) -> timedelta:
        """The join timeout (connect + join barrier) of one :meth:`next_rendezvous`."""
        return self._cfg.join_timeout

    @property
    def next_round(self) -> int:
        """The index of the round the next :meth:`next_rendezvous` joins (an rdzv
        extension: 0 before the first; every call is a new round)."""
        return self._node.next_round

    @property
    def config(self) -> StaticConfig:
        """Every validated setting (an rdzv extension)."""
        return self._cfg

    def get_backend(self) -> str:
        """Return ``"static"``."""
        return BACKEND

    @property
    def use_agent_store(self) -> bool:
        """True: the returned store lives as long as the hosting node's handler."""
        return True

    def next_rendezvous(self) -> RendezvousInfo:
        """Join the next round; return once every rank has joined it.

        Returns:
            The shared store (scoped to the run id, like torch's), this node's rank, the
            world size and the store's address.

        Raises:
            RendezvousClosedError: the rendezvous was closed, or this handler shut down.
            RendezvousConnectionError: node 0 could not bind the port; no rendezvous server
                answered in time; what answered is not a rendezvous store; the store
                vanished mid-round; or another member lost its store connection mid-join.
            RendezvousStateError: duplicate rank, world-size mismatch, or a round that had
                already ended when this node arrived.
            RendezvousTimeoutError: not every rank joined before the deadline.
        """
        cfg = self._cfg
        if self._shut_down:
            raise RendezvousClosedError(
                _msg(
                    f"this handler (rank {cfg.rank} of run '{cfg.run_id}') was shut down;",
                    "create a new handler to rendezvous again.",
                )
            )
        if self._closed_here:
            raise RendezvousClosedError(
                _msg(
                    f"the rendezvous of run '{cfg.run_id}' was closed by this node (rank",
                    f"{cfg.rank}); no further rounds run.",
                )
            )
        store = self._node.join_next()
        return RendezvousInfo(
            PrefixStore(cfg.run_id, store),
            cfg.rank,
            cfg.world_size,
            RendezvousStoreInfo(cfg.host, int(getattr(store, "port", cfg.port))),
        )

    def is_closed(self) -> bool:
        """Return whether any node closed this run (read from the store when connected).

        Raises:
            RendezvousConnectionError: the store could not be read.
        """
        store = self._node.store
        if store is None:
            return self._closed_here
        return bool(
            self._store_call("reading the closed flag", store.check, [self._node.keys.closed])
        )

    def set_closed(self) -> None:
        """Close the rendezvous for every node: waiting nodes fail now, later rounds at once.

        Before the first :meth:`next_rendezvous` only this handler is marked (it has no
        store yet); its next :meth:`next_rendezvous` raises ``RendezvousClosedError``.

        Raises:
            RendezvousConnectionError: the store could not be written.
        """
        self._closed_here = True
        node, store = self._node, self._node.store
        if store is not None:
            record = closed_record(node.me, time.time())
            done = node.keys.of(node.next_round, "done")
            self._store_call("writing the closed flag", store.set, node.keys.closed, record)
            self._store_call("closing the open round", store.compare_set, done, "", record)
        node.event("closed", node.next_round, 0.0)

    def num_nodes_waiting(self) -> int:
        """Return how many nodes joined the next round, which this node has not joined yet.

        Before the first :meth:`next_rendezvous` this node belongs to no group, so no node
        can be waiting for it: 0.

        Raises:
            RendezvousConnectionError: the store could not be read.
        """
        store = self._node.store
        if store is None:
            return 0
        count = self._node.keys.of(self._node.next_round, "count")
        # one round trip (torchrun polls this every 0.1 s): adding 0 reads the count, and a
        # count made 0 here is what a join's first add would start from anyway
        waiting = int(self._store_call("counting waiting nodes", store.add, count, 0))
        return min(waiting, self._cfg.world_size)  # a takeover counts a rank twice

    def get_run_id(self) -> str:
        """Return the run id."""
        return self._cfg.run_id

    def shutdown(self) -> bool:
        """Leave the run: an exit barrier, then close the connection (and server, if hosted).

        A node that does not host the store records that it is leaving, then closes its
        connection. The hosting node first waits until every other member of the last round
        has left, so nobody loses the store while still using it; then it stops the server.
        A member whose connection closed or whose process died counts as left; one alive but
        silent is waited for until no member answered for 10 s, ``read_timeout`` at most.
        Calling it again is harmless.

        Returns:
            True, or False when the hosting node gave up waiting for some live nodes to
            leave (they then lose the store) or the store was already gone; the
            ``exit_wait_ended`` and ``shutdown`` events say which. Store failures are
            reported this way, never raised.
        """
        self._shut_down = True
        left, error = self._node.leave()
        others = self._cfg.world_size - 1
        self._node.event(
            "shutdown", self._node.next_round, 0.0, others_left=left, others=others, error=error
        )
        return error is None and (left is None or left >= others)

    def declare_dead(self) -> None:
        """Declare this handler's process dead, without stopping or shutting it down.

        For runtimes that emulate a crashed node inside a live process (the harness's packed
        nodes: several nodes as threads of one process, sharing its pid). From this call on,
        a handler of the same process that finds this one's claim on its rank takes it over,
        as a restarted process takes over the claim of a dead one (a claim's liveness is
        otherwise probed by pid, and this process is alive). Does no I/O; this handler must
        not be used afterwards. :meth:`shutdown` has the same effect on liveness.
        """
        self._node.declare_dead()

    # -- internals ------------------------------------------------------------------------

    def _store_call(self, doing: str, op: Callable[..., Any], *args: Any) -> Any:
        try:
            return op(*args)
        except StoreError as exc:
            raise RendezvousConnectionError(
                _msg(
                    f"rank {self._cfg.rank} failed {doing} on the rendezvous store at",
                    f"{self._cfg.endpoint}: {exc}",
                )
            ) from exc


def create_rdzv_handler(params: RendezvousParameters) -> RendezvousHandler:
    """Build a :class:`StaticTCPRendezvous` from ``params`` (torch's factory).

    Checks, in torch's order: ``rank`` present, endpoint present, endpoint parses, port
    present; then that ``min_nodes == max_nodes`` and every option. No network activity.

    Raises:
        ValueError: a missing rank, endpoint or port; a malformed endpoint; a variable
            world size; or a bad option (naming the option and the value).
    """
    return StaticTCPRendezvous(params)


create_handler = create_rdzv_handler
"""Alias of :func:`create_rdzv_handler`."""
