"""The DNS shim of the local world: the endpoint's host name, resolved inside a node process.

When the endpoint host is a name, each node process installs a :class:`DnsShim`: the name
then resolves (in that process only) to the address the harness chose, or fails with
``EAI_NONAME`` while the harness says DNS is down. Each failed lookup is counted, so a
report can say whether a dns fault acted. A process that hosts several nodes installs the
shim once and counts each lookup in the slot of the node that made it (``slot_of``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["DnsShim", "install_dns_shim"]


class _Flag(Protocol):
    def is_set(self) -> bool: ...


class _Counters(Protocol):
    def __getitem__(self, index: int) -> int: ...
    def __setitem__(self, index: int, value: int) -> None: ...


@dataclass(frozen=True)
class DnsShim:
    """``name`` resolves to ``address`` while ``up`` is set, else fails like NXDOMAIN.

    Each failed lookup is counted in ``failures[slot]`` (shared memory, one slot per node,
    so no lock a killed process could leave held), for the report.
    """

    name: str
    address: str
    up: _Flag
    failures: _Counters | None = None
    slot: int = 0


def install_dns_shim(shim: DnsShim, slot_of: Callable[[], int | None] | None = None) -> None:
    """Make ``socket.getaddrinfo`` of this process answer for ``shim.name``.

    A failed lookup is counted in ``shim.failures[slot_of()]`` when ``slot_of`` is given and
    names a slot (the node of the calling thread), else in ``shim.slot``.
    """
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.lower() == shim.name.lower():
            if not shim.up.is_set():
                if shim.failures is not None:
                    slot = slot_of() if slot_of is not None else None
                    shim.failures[shim.slot if slot is None else slot] += 1
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known (harness)")
            host = shim.address
        return real(host, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo
