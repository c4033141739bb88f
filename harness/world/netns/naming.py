"""The netns world's names and addresses, and the sweep of what a dead harness left.

Every namespace a run creates is named ``harness-<pid>-<run>-<what>``: ``<pid>`` is the
harness process that made it, ``<run>`` eight hex digits unique to the run, ``<what>``
``sw`` (the switch: the namespace holding the bridge) or ``n<i>`` (node ``i``). Veths and
nft tables live inside those namespaces only and go with them, so the namespaces are the
whole inventory of a run: :func:`run_namespaces` finds a run's, :func:`orphans` those
whose harness is gone (a harness that was SIGKILLed cannot clean up; the next one does).

Addresses come from 198.18.0.0/15 (RFC 2544, benchmarking), never routed anywhere:
node ``i`` is ``198.18.0.0 + 10 + i`` on the nodes' /16 (:func:`node_address`); node 0's
second address (:data:`SECOND_NET`, 198.19.0.0/16) is on a network no other node has a
route to.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from typing import Final

import psutil

__all__ = [
    "NETNS_DIR",
    "NODE_NET",
    "PREFIX",
    "SECOND_NET",
    "SERVE_PORT",
    "is_second_address",
    "listed",
    "namespace",
    "node_address",
    "orphans",
    "run_id",
    "run_namespaces",
]

#: Where ``ip netns`` keeps its named namespaces.
NETNS_DIR: Final = "/run/netns"
PREFIX: Final = "harness-"
#: The nodes' network (on the bridge) and the store host's unreachable second network.
NODE_NET: Final = ipaddress.IPv4Network("198.18.0.0/16")
SECOND_NET: Final = ipaddress.IPv4Network("198.19.0.0/16")
#: The port node 0 serves the store on: torch's default (each node namespace is the
#: run's own, so no other process can hold it).
SERVE_PORT: Final = 29500
_FIRST: Final = 10
_NAME: Final = re.compile(r"^harness-(\d+)-([0-9a-f]{8})-(sw|n\d+)$")


def run_id(tag: str) -> str:
    """Eight hex digits for the run tag ``tag`` (names must stay short)."""
    return hashlib.sha256(tag.encode()).hexdigest()[:8]


def namespace(run: str, what: str, pid: int | None = None) -> str:
    """The name of the namespace ``what`` (``sw`` or ``n<i>``) of run ``run``."""
    return f"{PREFIX}{os.getpid() if pid is None else pid}-{run}-{what}"


def node_address(node: int) -> str:
    """Node ``node``'s address on the bridge.

    Raises:
        ValueError: the node number does not fit the network (over 65 000 nodes).
    """
    address = NODE_NET.network_address + _FIRST + node
    if address not in NODE_NET or address == NODE_NET.broadcast_address:
        raise ValueError(f"node {node} does not fit {NODE_NET} (at most 65 000 nodes)")
    return str(address)


def is_second_address(host: str) -> bool:
    """Whether ``host`` is an address on node 0's second network (:data:`SECOND_NET`)."""
    try:
        return ipaddress.ip_address(host) in SECOND_NET
    except ValueError:
        return False


def listed() -> list[str]:
    """Every named network namespace on this machine (``ip netns list``, from its folder)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def run_namespaces(run: str, pid: int | None = None) -> list[str]:
    """The namespaces of run ``run`` of harness ``pid`` (default: this process) that exist."""
    owner = os.getpid() if pid is None else pid
    return [
        name
        for name in listed()
        if (m := _NAME.match(name)) and int(m.group(1)) == owner and m.group(2) == run
    ]


def orphans() -> list[str]:
    """The namespaces of runs whose harness process is gone (not this process's)."""
    found = []
    for name in listed():
        match = _NAME.match(name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _alive_since(pid, os.path.join(NETNS_DIR, name)):
            found.append(name)
    return found


def _alive_since(pid: int, path: str) -> bool:
    """Whether process ``pid`` runs and is older than the file ``path`` (a younger one
    reuses the PID of the harness that made it)."""
    try:
        started = psutil.Process(pid).create_time()
        made = os.stat(path).st_mtime
    except (psutil.Error, OSError):
        return False
    return started <= made + 1.0
