"""A master ``TCPStore``'s side: the server it hosts, and the wait for its workers.

torch's ``multi_tenant=True``: a second multi-tenant master on the same port in the same
process reuses the first one's server, which stops when its last user releases it. The
master's own client dials that server over loopback (:func:`local_address`), then, given a
``world_size``, waits until that many clients have counted themselves on torch's ``init/``
key (:func:`await_workers`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rdzv.errors import StoreTimeoutError
from rdzv.store.wire._convert import format_elapsed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

if TYPE_CHECKING:  # a client that does not host never imports the server
    from rdzv.store.server import StoreServer

__all__ = ["TENANTS", "Tenancy", "await_workers", "local_address"]


def local_address(server: StoreServer) -> str:
    """Where a master's own client reaches its server: loopback when it listens on a
    wildcard, else the address it listens on (never a name that might not resolve)."""
    address = server.addresses[0][0]
    if address in ("::", "0.0.0.0", ""):
        return "127.0.0.1"
    return str(address)


class Tenancy:
    """Servers shared per port within this process (torch's ``multi_tenant=True``).

    This is process-wide state on purpose: torch's semantics are "a second multi-tenant
    master on the same port in the same process reuses the first one's server".

    A master's release also runs from a finalizer, which the garbage collector may run in
    this very thread while it updates the table (any allocation there can collect a
    master that was dropped unclosed). Such a re-entered release is deferred to the end of
    the update instead of waiting on a lock its own thread holds.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._busy = False  # the lock's holder is updating the table
        self._deferred: list[StoreServer] = []  # releases that re-entered an update
        self._shared: dict[int, tuple[StoreServer, int]] = {}

    def acquire(
        self, host: str, port: int, shared: bool, make: Callable[[], StoreServer]
    ) -> StoreServer:
        closing: list[StoreServer] = []
        try:
            with self._lock:
                self._busy = True
                try:
                    if shared and port in self._shared:
                        server, users = self._shared[port]
                        if server.running:
                            self._shared[port] = (server, users + 1)
                            return server
                    server = make().start()
                    if shared:
                        self._shared[server.port] = (server, 1)
                    return server
                finally:
                    closing = self._take_deferred()
                    self._busy = False
        finally:
            for done in closing:
                done.close()

    def release(self, server: StoreServer) -> None:
        with self._lock:
            if self._busy:  # re-entered from a finalizer during this thread's update
                self._deferred.append(server)
                return
            self._busy = True
            try:
                closing = [server] if self._forget(server) else []
                closing += self._take_deferred()
            finally:
                self._busy = False
        for done in closing:
            done.close()

    def _forget(self, server: StoreServer) -> bool:
        """Count one user of ``server`` less; True when none is left (close it)."""
        shared, users = self._shared.get(server.port, (None, 1))
        users -= 1
        if shared is server:
            if users > 0:
                self._shared[server.port] = (server, users)
            else:
                del self._shared[server.port]
        return users <= 0

    def _take_deferred(self) -> list[StoreServer]:
        """Apply the deferred releases; the servers they leave without users."""
        closing = []
        while self._deferred:
            server = self._deferred.pop()
            if self._forget(server):
                closing.append(server)
        return closing


#: This process's shared servers.
TENANTS: Final = Tenancy()


def await_workers(
    count: Callable[[float | None], int], world_size: int, timeout: float | None, endpoint: str
) -> None:
    """As the master of the store at ``endpoint``: return once ``count(deadline)`` (an ADD of
    0 on the init key, answered by ``deadline``) reaches ``world_size``, polling for at most
    ``timeout`` seconds (None: no limit).

    Raises:
        StoreTimeoutError: fewer clients joined in time, or the store did not answer the
            last count; the message says how many joined.
    """
    start = time.monotonic()
    deadline = None if timeout is None else time.monotonic() + timeout
    joined = 0

    def timed_out(more: str) -> StoreTimeoutError:
        elapsed = time.monotonic() - start
        if timeout is not None:
            elapsed = max(elapsed, timeout)  # that deadline is what passed
        return StoreTimeoutError(
            f"Timed out after {format_elapsed(elapsed, 1)} seconds waiting for clients. "
            f"{joined}/{world_size} clients joined (store at {endpoint}){more}."
        )

    while True:
        try:
            joined = count(deadline)
        except StoreTimeoutError as exc:
            raise timed_out("; the store did not answer the last count") from exc
        if joined >= world_size:
            return
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise timed_out("")
        time.sleep(0.01 if deadline is None else min(0.01, deadline - now))
