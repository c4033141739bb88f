"""The DNS shim of the local world: the endpoint's host name, resolved inside a node process.

When the endpoint host is a name, each node process installs a :class:`DnsShim`: the name
then resolves (in that process only) to the address the harness chose, or fails with
``EAI_NONAME`` while the harness says DNS is down. Each failed lookup is counted, so a
report can say whether a dns fault acted. A process that hosts several nodes installs the
shim once and counts each lookup in the slot of the node that made it (``slot_of``).

:class:`EndpointName` is the harness's side, shared by the worlds whose nodes are processes
on this machine (local, packed, netns): the switch and the counts in shared memory, each
node's shim, and ``names_down`` (:func:`names_down`, a :class:`NameDown`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from harness.errors import HarnessError

__all__ = ["DnsShim", "EndpointName", "NameDown", "install_dns_shim", "names_down"]


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


class EndpointName:
    """The endpoint's host ``name``, resolving to ``address`` in the node processes of one
    run of ``nodes`` nodes: the switch their shims read and one count of failed lookups per
    node, in shared memory made from the cluster's multiprocessing context ``ctx``."""

    def __init__(self, ctx: Any, name: str, address: str, nodes: int) -> None:
        self.name = name
        self.address = address
        self.up = ctx.Event()
        self.up.set()
        self.failures = ctx.Array("q", nodes, lock=False)

    def shim(self, node: int) -> DnsShim:
        """The shim node ``node`` installs (its failed lookups counted in its own slot)."""
        return DnsShim(self.name, self.address, self.up, self.failures, node)

    def failed(self) -> int:
        """How many lookups of the name the shims have failed so far (all nodes)."""
        return sum(self.failures)


@dataclass
class NameDown:
    """The endpoint's name, not resolving (:class:`harness.world.base.Names`); ``base``:
    the lookups that had failed before it went down."""

    name: EndpointName
    base: int

    def up(self) -> None:
        self.name.up.set()

    def failed(self) -> int:
        return self.name.failed() - self.base


def names_down(name: EndpointName | None, host: str) -> NameDown:
    """Stop the endpoint's name resolving (``World.names_down`` of a world whose nodes are
    processes here); ``name`` None: the endpoint ``host`` is an IP address.

    Raises:
        HarnessError: ``host`` is an IP address (the scenario gave the endpoint no name).
    """
    if name is None:
        raise HarnessError(
            f"names_down: the endpoint host {host!r} is an IP address, so "
            "there is no name to stop resolving (give the endpoint a host name)"
        )
    base = name.failed()
    name.up.clear()
    return NameDown(name, base)
