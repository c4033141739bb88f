"""Entering a node's network namespace: the netns world's node entry point.

Python 3.11 has no ``os.setns`` (3.12 adds it), so :func:`enter` calls libc's
``setns(fd, CLONE_NEWNET)`` through ctypes: ten lines instead of a dependency (pyroute2's
``netns.setns`` does the same), and no ``ip netns exec`` process per node. A node process
is a forkserver child (:mod:`harness.world.process.cluster`, warm imports, a few ms to start):
:func:`node_entry` enters the namespace first, before the node opens any socket, and then
runs the local world's node unchanged (:func:`harness.world.process.node.run_node`). A network
namespace is per thread, and the child is single-threaded at that point; its pipe to the
harness is not a socket of any network, so it keeps working.
"""

from __future__ import annotations

import ctypes
import functools
import os
from typing import Any, Final

from harness.world.process.forkserver import run_entry
from harness.world.process.node import NodeSpec

__all__ = ["CLONE_NEWNET", "PLACEMENT", "enter", "node_entry"]

CLONE_NEWNET: Final = 0x40000000
#: Where the report says a node of this world ran.
PLACEMENT: Final = "process in a network namespace of its own"
#: This process's own symbols, libc's among them (no ``find_library``: it runs ``ldconfig``
#: in a subprocess); made once, at import, so forkserver children inherit it.
_LIBC: Final = ctypes.CDLL(None, use_errno=True)


def enter(path: str) -> None:
    """Move the calling thread into the network namespace at ``path`` (``/run/netns/X``).

    Raises:
        OSError: the namespace does not exist, or setns(2) refused (not root).
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _LIBC.setns(fd, CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"setns into {path}: {os.strerror(code)}")
    finally:
        os.close(fd)


def node_entry(channel: Any, output_path: str, netns_path: str, spec: NodeSpec, gate: Any) -> None:
    """A node of the netns world: enter its namespace, then run it as the local world does
    (ready, then waiting at the world's start ``gate`` until the release)."""
    setup = functools.partial(enter, netns_path)
    run_entry(channel, output_path, spec, gate, PLACEMENT, setup)
