"""The netns world's network: a namespace per node, a bridge in a namespace of its own.

::

    harness-<pid>-<run>-sw          br0 ── n0 ── n1 ── ... ── n999     (veth ends)
                                     └ u1 ── d1 ─ br1 ── n1000 ...       (1000 per bridge)
                                           │     │
    harness-<pid>-<run>-n<i>              eth0  eth0 198.18.0.<10+i>/16, lo up

Packet rules (:mod:`harness.world.netns.rules`) match where a packet enters the switch
from a node's port (``n*``), so a packet crossing a trunk is judged once.

Node 0 also has 198.19.0.1/16 (on its ``lo``: the kernel here has no dummy links): an
address of the store host on a network no other node has a route to (a multi-homed host;
workers told that address get "no route"). No namespace has a default route, nothing is
routed outside, and the host's own interfaces, routes and firewall are never touched:
every command runs inside the run's namespaces (``ip -n``), the only host-side change
being the namespaces' names
under ``/run/netns``.

Built with one ``ip -batch`` for the namespaces and one for the switch; each node's
addresses, links and neighbours are set from one thread that enters the namespaces in turn
(:mod:`~harness.world.netns.configure`); removed by deleting the namespaces, which takes
their links, addresses and nft tables with them.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from harness.errors import HarnessError
from harness.world.netns.configure import NodeSetup, configure
from harness.world.netns.naming import (
    NETNS_DIR,
    NODE_NET,
    SECOND_NET,
    listed,
    namespace,
    node_address,
    orphans,
    run_namespaces,
)
from harness.world.netns.shell import run

__all__ = ["SECOND_ADDRESS", "Network", "sweep"]

#: Node 0's address on the network the others cannot reach.
SECOND_ADDRESS: Final = str(SECOND_NET.network_address + 1)
_PORTS: Final = 1000  # node ports per bridge (the kernel allows 1023)
_CHUNK: Final = 256  # namespaces per ``ip -batch`` on the host


def sweep() -> list[str]:
    """Delete the namespaces of dead harnesses (:func:`~naming.orphans`); returns their
    names."""
    found = orphans()
    for chunk in _chunks(found):
        run(
            ["ip", "-force", "-batch", "-"], "".join(f"netns del {n}\n" for n in chunk), check=False
        )
    return found


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _mac(node: int) -> str:
    """Node ``node``'s MAC address (locally administered, from its number)."""
    return "02:00:" + ":".join(f"{byte:02x}" for byte in node.to_bytes(4, "big"))


@dataclass
class Network:
    """The namespaces, links and addresses of one run; :meth:`build`, then always
    :meth:`teardown` (idempotent)."""

    run_id: str
    nodes: int
    #: Node 0's address on the network the others cannot reach.
    second: str = SECOND_ADDRESS
    switch: str = ""
    names: list[str] = field(default_factory=list)
    _made: list[str] = field(default_factory=list)
    _torn_down: bool = False

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{8}", self.run_id):
            raise ValueError(
                f"run_id must be 8 hex digits (naming.run_id(tag) makes one), got {self.run_id!r}"
            )
        self.switch = namespace(self.run_id, "sw")
        self.names = [namespace(self.run_id, f"n{i}") for i in range(self.nodes)]

    def path(self, node: int) -> str:
        """The file of node ``node``'s namespace (what setns(2) opens)."""
        return os.path.join(NETNS_DIR, self.names[node])

    def address(self, node: int) -> str:
        """Node ``node``'s address on the bridge."""
        return node_address(node)

    def build(self) -> None:
        """Create everything; on failure remove what was made, then raise.

        Raises:
            HarnessError: an ``ip`` command failed (the message says which and why).
        """
        try:
            self._build()
        except BaseException:
            self.teardown()
            raise

    def _build(self) -> None:
        wanted = [self.switch, *self.names]
        for chunk in _chunks(wanted):
            self._made.extend(chunk)  # a half-made batch is still removed at teardown
            run(["ip", "-batch", "-"], "".join(f"netns add {n}\n" for n in chunk))
        lines = ["link set lo up"]
        for k in range(0, max(1, -(-self.nodes // _PORTS))):
            lines += [f"link add br{k} type bridge", f"link set br{k} up"]
            if k:  # a trunk from br0: a bridge has at most 1023 ports
                lines.append(f"link add u{k} type veth peer name d{k}")
                lines += [f"link set u{k} master br0 up", f"link set d{k} master br{k} up"]
        for i, name in enumerate(self.names):
            peer = f"name eth0 address {_mac(i)} netns {name}"
            lines.append(f"link add n{i} type veth peer {peer}")
            lines.append(f"link set n{i} master br{i // _PORTS} up")
        run(["ip", "-n", self.switch, "-batch", "-"], "\n".join(lines) + "\n")
        configure([self._setup(node) for node in range(self.nodes)])

    def _setup(self, node: int) -> NodeSetup:
        # Permanent neighbours (node 0 <-> every node) instead of ARP: the kernel's table is
        # shared by every namespace and refuses new dynamic entries past gc_thresh3 (1024
        # here), which 1024 nodes reach; permanent entries do not count against it.
        mask = str(NODE_NET.netmask)
        addresses = [("eth0", self.address(node), mask)]
        if node == 0:
            addresses.append(("lo:1", self.second, str(SECOND_NET.netmask)))
            neighbours = [(self.address(i), _mac(i)) for i in range(1, self.nodes)]
        else:
            neighbours = [(self.address(0), _mac(0))]
        return NodeSetup(self.path(node), addresses, neighbours=neighbours)

    def teardown(self) -> list[str]:
        """Delete the run's namespaces (and with them every link, address and rule).

        Returns:
            Leaks: the run's namespaces that still exist afterwards.
        """
        if self._torn_down:
            return []
        self._torn_down = True
        present = set(listed())
        doomed = [name for name in self._made if name in present]
        problems = []
        for chunk in _chunks(doomed):
            with contextlib.suppress(HarnessError):
                run(["ip", "-force", "-batch", "-"], "".join(f"netns del {n}\n" for n in chunk))
        left = sorted(set(run_namespaces(self.run_id)) | (set(listed()) & set(self._made)))
        if left:
            shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
            problems.append(f"network namespaces still present after teardown: {shown}")
        return problems
