"""Checks several fault kinds share, for their :meth:`~harness.scenario.faults.base.Fault.check`.

Each returns the problems it finds, one line each in the key-path style of
:mod:`harness.scenario.explain`.
"""

from __future__ import annotations

from harness.scenario.faults.base import Whole
from harness.scenario.format import Nodes, shown, targets
from harness.world.base import is_ip

__all__ = ["needs_a_host_name", "not_node_0", "on_a_proxy_link", "reaches_started_nodes"]


def not_node_0(index: int, whole: Whole, nodes: Nodes) -> list[str]:
    """Node 0 hosts the store and has no link: a fault on links cannot target it."""
    if 0 not in targets(whole.count, nodes):
        return []
    return [
        (
            f"fault[{index}].nodes: got {shown(nodes)}, which includes node 0; node 0 hosts "
            "the store and reaches it without a link: target other nodes (the default "
            "'others' does)"
        )
    ]


def on_a_proxy_link(index: int, whole: Whole, kind: str) -> list[str]:
    """A fault that acts on a node's proxy link needs ``endpoint.via_proxy``."""
    if whole.endpoint is None or whole.endpoint.via_proxy:
        return []
    return [
        (
            f"fault[{index}]: a {kind} fault acts on a node's proxy link, but "
            "endpoint.via_proxy is false; set it to true (the default)"
        )
    ]


def needs_a_host_name(index: int, whole: Whole, kind: str) -> list[str]:
    """A fault on name resolution needs ``endpoint.host`` to be a name."""
    if whole.endpoint is None or not is_ip(whole.endpoint.host):
        return []
    return [
        (
            f"fault[{index}]: a {kind} fault needs a host name, but endpoint.host "
            f"{whole.endpoint.host!r} is an IP address; give the endpoint a host name "
            "(e.g. 'store.rdzv.test')"
        )
    ]


def reaches_started_nodes(index: int, whole: Whole, kind: str, nodes: list[int]) -> list[str]:
    """A fault that acts on a node cannot target one that never starts."""
    never = sorted(whole.absent & set(nodes))
    if not never:
        return []
    return [
        (
            f"fault[{index}].nodes: got {shown(nodes)}; node(s) {shown(never)} never "
            f"start: an 'absent' fault names them, so a {kind} cannot reach them"
        )
    ]
