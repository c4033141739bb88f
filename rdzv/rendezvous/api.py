"""torch's rendezvous API, re-implemented: the handler ABC, its parameters and results.

Switching from torch is one import: every public name of
``torch.distributed.elastic.rendezvous.api`` exists here with the same signature and the
same validation messages, and the ``Rendezvous*`` errors are re-exported from
:mod:`rdzv.errors` (where ``RendezvousTimeoutError`` is also a :class:`TimeoutError` and
``RendezvousConnectionError`` also a :class:`ConnectionError`, unlike torch's).

``RendezvousHandlerRegistry`` and ``rendezvous_handler_registry`` live in
:mod:`rdzv.rendezvous.registry`; they are reachable from here too (lazily, to avoid an
import cycle), as they are from torch's ``api`` module.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from collections.abc import Callable

from rdzv.errors import (
    RendezvousClosedError,
    RendezvousConnectionError,
    RendezvousError,
    RendezvousGracefulExitError,
    RendezvousStateError,
    RendezvousTimeoutError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from rdzv.store.base import Store

__all__ = [
    "RendezvousClosedError",
    "RendezvousConnectionError",
    "RendezvousError",
    "RendezvousGracefulExitError",
    "RendezvousHandler",
    "RendezvousHandlerCreator",
    "RendezvousHandlerRegistry",  # noqa: F822 (module __getattr__, from rdzv.rendezvous.registry)
    "RendezvousInfo",
    "RendezvousParameters",
    "RendezvousStateError",
    "RendezvousStoreInfo",
    "RendezvousTimeoutError",
    "rendezvous_handler_registry",  # noqa: F822 (module __getattr__)
]

_TRUE_SPELLINGS = frozenset({"1", "true", "t", "yes", "y"})
_FALSE_SPELLINGS = frozenset({"0", "false", "f", "no", "n"})


class RendezvousStoreInfo:
    """Where trainers find the store: published as ``MASTER_ADDR`` / ``MASTER_PORT``.

    torch's is a dataclass; this one has the same fields, ``==`` and ``repr`` without
    importing ``dataclasses`` (a few milliseconds of every node's import line).
    """

    MASTER_ADDR_KEY: ClassVar[str] = "MASTER_ADDR"
    MASTER_PORT_KEY: ClassVar[str] = "MASTER_PORT"

    __slots__ = ("master_addr", "master_port")

    def __init__(self, master_addr: str, master_port: int) -> None:
        self.master_addr = master_addr
        self.master_port = master_port

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RendezvousStoreInfo):
            return NotImplemented
        return (self.master_addr, self.master_port) == (other.master_addr, other.master_port)

    def __hash__(self) -> int:
        return hash((self.master_addr, self.master_port))

    def __repr__(self) -> str:
        return (
            f"RendezvousStoreInfo(master_addr={self.master_addr!r}, "
            f"master_port={self.master_port!r})"
        )

    @staticmethod
    def build(
        rank: int,
        store: Store,
        local_addr: str | None,
        server_port: int | None = None,
    ) -> RendezvousStoreInfo:
        """Publish (rank 0) and read (every rank) the bootstrap address through ``store``.

        Rank 0 writes ``MASTER_ADDR`` (``local_addr``, else this machine's FQDN) and
        ``MASTER_PORT`` (``server_port``, else a port the OS reports free); then every rank,
        rank 0 included, reads both keys back, blocking up to the store's timeout.

        Without ``server_port`` the port is chosen the way torch does it: bind port 0, read
        it, close the socket. Another process may take that port before the trainer binds
        it; pass ``server_port`` (for example the store's own port) to avoid the race.

        Args:
            rank: this node's rank; rank 0 publishes.
            store: the store every rank shares.
            local_addr: the address rank 0 advertises; ``None`` means ``socket.getfqdn()``.
            server_port: the port rank 0 advertises; ``None`` means "find a free one".

        Returns:
            The address and port every rank read from the store.

        Raises:
            StoreTimeoutError: a key did not appear within the store's timeout.
            StoreConnectionError: the store connection failed.
            ValueError: the published port is not an integer.
        """
        if rank == 0:
            addr = local_addr or socket.getfqdn()
            port = server_port or _free_port()
            store.set(RendezvousStoreInfo.MASTER_ADDR_KEY, addr.encode("utf-8"))
            store.set(RendezvousStoreInfo.MASTER_PORT_KEY, str(port).encode("utf-8"))
        addr_read = store.get(RendezvousStoreInfo.MASTER_ADDR_KEY).decode("utf-8")
        port_read = int(store.get(RendezvousStoreInfo.MASTER_PORT_KEY).decode("utf-8"))
        return RendezvousStoreInfo(master_addr=addr_read, master_port=port_read)


def _free_port() -> int:
    """Return a port the OS reported free a moment ago (racy by contract, see ``build``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        port: int = sock.getsockname()[1]
        return port


class RendezvousInfo:
    """The outcome of one rendezvous round: the shared store, this node's rank, the size."""

    def __init__(
        self,
        store: Store,
        rank: int,
        world_size: int,
        bootstrap_store_info: RendezvousStoreInfo,
    ) -> None:
        self._store = store
        self._rank = rank
        self._world_size = world_size
        self._bootstrap_store_info = bootstrap_store_info

    @property
    def store(self) -> Store:
        """The store every member of the round shares (scoped to the run id)."""
        return self._store

    @property
    def rank(self) -> int:
        """This node's rank within the round."""
        return self._rank

    @property
    def world_size(self) -> int:
        """How many nodes the round admitted."""
        return self._world_size

    @property
    def bootstrap_store_info(self) -> RendezvousStoreInfo | None:
        """Where trainer code finds the store to bootstrap its own communication."""
        return self._bootstrap_store_info

    def __repr__(self) -> str:
        info = self._bootstrap_store_info
        return f"RendezvousInfo(rank={self._rank}, world_size={self._world_size}, {info!r})"


class RendezvousHandler(ABC):
    """The rendezvous interface torch's elastic agent drives (same methods, same contracts)."""

    @abstractmethod
    def get_backend(self) -> str:
        """Return the backend name; the registry checks it against the requested one."""

    @property
    def use_agent_store(self) -> bool:
        """Whether the store from :meth:`next_rendezvous` may be shared with user code.

        When True, the store lives as long as the application and its address is handed
        out as :class:`RendezvousStoreInfo` (``MASTER_ADDR`` / ``MASTER_PORT``).
        """
        return False

    @abstractmethod
    def next_rendezvous(self) -> RendezvousInfo:
        """Block until this round is complete and includes this node; return its outcome.

        Raises:
            RendezvousClosedError: the rendezvous is closed.
            RendezvousConnectionError: the connection to the rendezvous backend failed.
            RendezvousStateError: the rendezvous state is corrupt or stale.
            RendezvousTimeoutError: the round did not complete before the deadline.
        """

    @abstractmethod
    def is_closed(self) -> bool:
        """Return whether the rendezvous is closed (eventually consistent, not a barrier)."""

    @abstractmethod
    def set_closed(self) -> None:
        """Close the rendezvous: every later round of this run fails on every node."""

    @abstractmethod
    def num_nodes_waiting(self) -> int:
        """Return how many nodes wait to join a round this node has not joined yet."""

    @abstractmethod
    def get_run_id(self) -> str:
        """Return the user-chosen id of the distributed run."""

    @abstractmethod
    def shutdown(self) -> bool:
        """Release every resource opened for the rendezvous; return True on success."""


class RendezvousParameters:
    """Everything a backend needs to build a :class:`RendezvousHandler`.

    Args:
        backend: the backend name, e.g. ``"static"``.
        endpoint: where the rendezvous happens, usually ``host[:port]``.
        run_id: the id of the distributed run.
        min_nodes: the fewest nodes a round admits.
        max_nodes: the most nodes a round admits.
        local_addr: this node's address, if it should not be derived.
        **kwargs: backend-specific options, available as :attr:`config`.

    Raises:
        ValueError: ``backend`` is empty, ``min_nodes`` < 1 or ``max_nodes`` < ``min_nodes``
            (torch's messages).
    """

    def __init__(
        self,
        backend: str,
        endpoint: str,
        run_id: str,
        min_nodes: int,
        max_nodes: int,
        local_addr: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not backend:
            raise ValueError("The rendezvous backend name must be a non-empty string.")
        if min_nodes < 1:
            raise ValueError(
                f"The minimum number of rendezvous nodes ({min_nodes}) must be greater than zero."
            )
        if max_nodes < min_nodes:
            raise ValueError(
                " ".join(
                    (
                        f"The maximum number of rendezvous nodes ({max_nodes}) must be greater",
                        "than or equal to the minimum number of rendezvous nodes",
                        f"({min_nodes}).",
                    )
                )
            )
        self.backend = backend
        self.endpoint = endpoint
        self.run_id = run_id
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.config: dict[str, Any] = kwargs
        self.local_addr = local_addr

    def __repr__(self) -> str:
        fields = ", ".join(
            (
                f"backend={self.backend!r}",
                f"endpoint={self.endpoint!r}",
                f"run_id={self.run_id!r}",
                f"min_nodes={self.min_nodes}",
                f"max_nodes={self.max_nodes}",
                f"local_addr={self.local_addr!r}",
                f"config={self.config!r}",
            )
        )
        return f"RendezvousParameters({fields})"

    def get(self, key: str, default: Any = None) -> Any:
        """Return the option ``key``, or ``default`` when it is absent."""
        return self.config.get(key, default)

    def get_as_bool(self, key: str, default: bool | None = None) -> bool | None:
        """Return the option ``key`` (or ``default``, parsed the same way) as a bool.

        Accepted: ``None``; a bool; the ints 1 and 0; the strings ``1 true t yes y`` and
        ``0 false f no n`` in any case (not stripped).

        Raises:
            ValueError: any other value (torch's message, naming the key).
        """
        value = self.get(key, default)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return value == 1
        if isinstance(value, str):
            lowered = value.lower()
            if lowered in _TRUE_SPELLINGS:
                return True
            if lowered in _FALSE_SPELLINGS:
                return False
        what = "does not represent a valid boolean value."
        raise ValueError(f"The rendezvous configuration option '{key}' {what}")

    def get_as_int(self, key: str, default: int | None = None) -> int | None:
        """Return the option ``key`` (or ``default``) converted with :func:`int`.

        Raises:
            ValueError: ``int()`` rejects the value (torch's message, naming the key).
            TypeError: the value has a type ``int()`` cannot convert (e.g. a list).
        """
        value = self.get(key, default)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError as exc:
            what = "does not represent a valid integer value."
            raise ValueError(f"The rendezvous configuration option '{key}' {what}") from exc
        except TypeError as exc:
            kind = type(value).__name__
            what = "expected an int or a numeric string."
            raise TypeError(
                f"The rendezvous configuration option '{key}' is a {kind} ({value!r}); {what}"
            ) from exc


RendezvousHandlerCreator = Callable[[RendezvousParameters], RendezvousHandler]


def __getattr__(name: str) -> Any:
    """Reach the registry names from here, as torch's ``api`` module allows."""
    if name in ("RendezvousHandlerRegistry", "rendezvous_handler_registry"):
        from rdzv.rendezvous import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
