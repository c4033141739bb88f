"""What a node does last before it says ``ready``: take the page faults of its first step.

See :func:`warm_up` and docs/reports.md, "Start-up and release skew".
"""

from __future__ import annotations

import logging
import os
import sys
from types import FunctionType
from typing import Final

__all__ = ["warm_up"]


#: The modules whose functions a node runs between the release and its first blocking call:
#: rdzv's join and store client (a member's express first), and the dialling.
_FIRST_STEP_MODULES: Final = frozenset(
    {
        "rdzv.events",
        "rdzv.rendezvous._connection",
        "rdzv.rendezvous._express",
        "rdzv.rendezvous._node",
        "rdzv.rendezvous.static",
        "rdzv.store.client._connect",
        "rdzv.store.client._express",
        "rdzv.store.wire._messages",
        "rdzv.store.client._transport",
        "rdzv.store.wire._wire",
        "rdzv.store.client._client",
        "socket",
    }
)


#: The processes whose pages :func:`warm_up` copied already (by PID: a forked child is not).
_WARM: set[int] = set()


def warm_up(node: int) -> None:
    """Take, before the start gate, page faults the node's first step would take after the
    release.

    A node process is forked from the forkserver: the pages it shares with it are copied on
    its first write to them, and running Python code writes to the objects it uses (their
    reference counts; a code object's bytecode as it is specialised). The first steps of a
    join (its first log record, dialling the store) took some 150 such faults. Here the node
    logs one record the way rdzv logs its events (no event payload: the forwarders drop
    it), and takes a reference to the functions and code objects (module level and methods)
    of :data:`_FIRST_STEP_MODULES`, which copies the pages that hold them: at most 213 pages
    (0.8 MiB) per node, most of which its first step would copy anyway. (All of rdzv's
    objects cost 2.5 MiB more per node for the same gain.)
    """
    if os.getpid() in _WARM:
        return  # another node of this process did it (packed nodes are threads)
    _WARM.add(os.getpid())
    logging.getLogger("rdzv.rendezvous").debug("node %d is at the start gate", node)
    held: list[object] = []
    for name in _FIRST_STEP_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        for value in list(vars(module).values()):
            members = list(vars(value).values()) if isinstance(value, type) else [value]
            functions = [member for member in members if isinstance(member, FunctionType)]
            held.extend(functions)
            held.extend(function.__code__ for function in functions)
    del held
