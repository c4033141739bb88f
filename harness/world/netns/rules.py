"""The netns world's faults in the kernel: nft packet rules and ``tbf`` rate limits.

Where each kind of rule lives (all inside the run's namespaces, never the host's):

* ``drop`` (and random loss): in the switch namespace, a ``bridge`` table ``harness`` whose
  ``faults`` chain sits on the bridge's ``forward`` hook: a rule there is a firewall on the
  wire between hosts. It matches packets as they enter the switch from a node's port
  (``iifname "n*"``), so a packet that crosses a trunk between bridges is judged once.
* ``reject-*``: this kernel cannot reject on a bridge (no ``nft_reject_bridge``), so a
  reject rule sits in each destination node's namespace, an ``inet`` table ``harness`` on
  the ``input`` hook: the destination host's own firewall answers (a TCP reset or an ICMP
  host-unreachable).
* bandwidth: a ``tbf`` qdisc on the switch's port of each node (traffic *to* the node) and
  on the node's ``eth0`` (traffic *from* it).

Every rule has a counter; :meth:`NftRule.acted` reports what it matched (read when it is
lifted, or by :meth:`Rules.snapshot` before the namespaces are deleted).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.errors import HarnessError
from harness.world.base import PacketRule
from harness.world.netns.shell import in_namespace, run

__all__ = ["NftRule", "RateLimit", "Rules", "match_text"]

_TABLE: Final = "harness"
_SWITCH_TABLE: Final = (
    f"table bridge {_TABLE} {{\n"
    "  chain faults { type filter hook forward priority 0; policy accept; }\n}\n"
)
_HOST_TABLE: Final = (
    f"table inet {_TABLE} {{\n"
    "  chain input { type filter hook input priority 0; policy accept; }\n}\n"
)
_HANDLE: Final = re.compile(r"# handle (\d+)")


def _addresses(nodes: Sequence[int], address: Callable[[int], str]) -> str:
    inside = ", ".join(address(node) for node in sorted(set(nodes)))
    return f"{{ {inside} }}"


def _ports(ports: Sequence[int]) -> str:
    return "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"


def match_text(rule: PacketRule, address: Callable[[int], str], everyone: int) -> str:
    """The nft match of ``rule`` (without the port check of the bridge or the verdict).

    ``everyone``: how many nodes there are (a side with all of them needs no match).
    """
    parts = []
    if len(set(rule.sources)) < everyone:
        parts.append(f"ip saddr {_addresses(rule.sources, address)}")
    if len(set(rule.destinations)) < everyone:
        parts.append(f"ip daddr {_addresses(rule.destinations, address)}")
    tcp = bool(rule.ports or rule.except_ports or rule.syn_only)
    if rule.verdict == "reject-reset" and not tcp:
        parts.append("meta l4proto tcp")
    if rule.ports:
        parts.append(f"tcp dport {_ports(rule.ports)}")
    if rule.except_ports:
        parts.append(f"tcp dport != {_ports(rule.except_ports)}")
    if rule.syn_only:
        parts.append("tcp flags & (syn | ack) == syn")
    if rule.percent < 100:
        parts.append(f"numgen random mod 10000 < {round(rule.percent * 100)}")
    return " ".join(parts)


_VERDICTS: Final = {
    "drop": "drop",
    "reject-reset": "reject with tcp reset",
    "reject-unreachable": "reject with icmpx type host-unreachable",
}


@dataclass
class NftRule:
    """One :class:`PacketRule` as nft rules (one, or one per destination namespace)."""

    owner: Rules
    label: str
    #: (namespace, family, chain, handle) of each nft rule it put in place.
    placed: list[tuple[str, str, str, int]]
    counted: int = 0
    lifted: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> None:
        """Read its counters now (while its namespaces exist)."""
        with self._lock:
            if not self.lifted:
                self.counted = sum(self.owner.packets(place) for place in self.placed)

    def lift(self) -> None:
        with self._lock:
            if self.lifted:
                return
            self.counted = sum(self.owner.packets(place) for place in self.placed)
            self.lifted = True
            for ns, family, chain, handle in self.placed:
                run(
                    in_namespace(
                        ns, ["nft", "delete", "rule", family, _TABLE, chain, "handle", str(handle)]
                    ),
                    check=False,
                )

    def acted(self) -> dict[str, int]:
        return {self.label: self.counted} if self.counted else {}


@dataclass
class RateLimit:
    """``tbf`` qdiscs on some links: (namespace, device) each."""

    owner: Rules
    devices: list[tuple[str, str]]
    counts: dict[str, int] = field(default_factory=dict)
    lifted: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> None:
        with self._lock:
            if not self.lifted:
                self.counts = self._read()

    def _read(self) -> dict[str, int]:
        dropped = delayed = 0
        for ns, dev in self.devices:
            stats = _qdisc_stats(ns, dev)
            dropped += stats.get("drops", 0)
            delayed += stats.get("overlimits", 0)
        return {"packets dropped by the rate limit": dropped, "packets held back": delayed}

    def lift(self) -> None:
        with self._lock:
            if self.lifted:
                return
            self.counts = self._read()
            self.lifted = True
            for ns, dev in self.devices:
                run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)

    def acted(self) -> dict[str, int]:
        return {what: n for what, n in self.counts.items() if n}


def _qdisc_stats(ns: str, dev: str) -> dict[str, int]:
    try:
        shown = json.loads(run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev]) or "[]")
    except (HarnessError, ValueError):
        return {}
    for qdisc in shown:
        if qdisc.get("kind") == "tbf":
            return {k: int(v) for k, v in qdisc.items() if isinstance(v, int)}
    return {}


@dataclass
class Rules:
    """The packet rules and rate limits of one run's network."""

    switch: str
    names: Sequence[str]
    address: Callable[[int], str]
    _tables: set[str] = field(default_factory=set)
    _placed: list[NftRule | RateLimit] = field(default_factory=list)
    _ids: Any = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _table(self, ns: str) -> None:
        with self._lock:
            if ns in self._tables:
                return
            run(
                in_namespace(ns, ["nft", "-f", "-"]),
                _SWITCH_TABLE if ns == self.switch else _HOST_TABLE,
            )
            self._tables.add(ns)

    def add(self, rule: PacketRule) -> NftRule:
        """Put ``rule`` in place (see the module docstring for where).

        Raises:
            HarnessError: nft refused it (the message has nft's words and the rule).
        """
        match = match_text(rule, self.address, len(self.names))
        comment = f'comment "r{next(self._ids)}"'
        verdict = _VERDICTS[rule.verdict]
        if rule.verdict == "drop":
            where = [(self.switch, "bridge", "faults", f'iifname "n*" {match}')]
        else:
            where = [
                (self.names[d], "inet", "input", match) for d in sorted(set(rule.destinations))
            ]
        placed: list[tuple[str, str, str, int]] = []
        found = NftRule(self, rule.label, placed)
        with self._lock:
            self._placed.append(found)
        for ns, family, chain, text in where:
            self._table(ns)
            line = f"add rule {family} {_TABLE} {chain} {text} counter {verdict} {comment}\n"
            echoed = run(in_namespace(ns, ["nft", "-a", "-e", "-f", "-"]), line)
            handle = _HANDLE.search(echoed)
            if handle is None:
                raise HarnessError(f"netns world: nft did not say the handle of: {line.strip()}")
            placed.append((ns, family, chain, int(handle.group(1))))
        return found

    def packets(self, place: tuple[str, str, str, int]) -> int:
        """How many packets the nft rule at ``place`` matched (0 when it cannot be read)."""
        ns, family, chain, handle = place
        try:
            listed = json.loads(
                run(in_namespace(ns, ["nft", "-j", "list", "chain", family, _TABLE, chain]))
            )
        except (HarnessError, ValueError):
            return 0
        for item in listed.get("nftables", []):
            found = item.get("rule")
            if found and found.get("handle") == handle:
                for expr in found.get("expr", []):
                    if "counter" in expr:
                        return int(expr["counter"].get("packets", 0))
        return 0

    def limit(self, nodes: Sequence[int], rate_kbit: int, direction: str) -> RateLimit:
        """``tbf`` at ``rate_kbit`` kbit/s on the nodes' links (``in``, ``out`` or ``both``).

        Raises:
            HarnessError: ``tc`` refused it.
        """
        burst = max(rate_kbit * 1000 // 8 // 10, 4096)  # 100 ms of traffic, at least 4 KiB
        devices = []
        for node in sorted(set(nodes)):
            if direction in ("in", "both"):
                devices.append((self.switch, f"n{node}"))
            if direction in ("out", "both"):
                devices.append((self.names[node], "eth0"))
        found = RateLimit(self, devices)
        with self._lock:
            self._placed.append(found)
        for ns, dev in devices:
            shape = ["rate", f"{rate_kbit}kbit", "burst", str(burst), "latency", "1s"]
            run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", *shape])
        return found

    def snapshot(self) -> None:
        """Read every rule's counters (before the namespaces go)."""
        with self._lock:
            placed = list(self._placed)
        for item in placed:
            item.snapshot()
