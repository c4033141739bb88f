"""The TCP counters of this process's network namespace (``/proc/self/net/snmp`` and
``netstat``): what a trial's connects did, seen by the kernel rather than by the library.

A trial runs alone in its own namespace (``unshare -n``), so the counters are the trial's own.
``refused`` (``Tcp: AttemptFails``) counts connects answered with a reset: a worker whose
first dial raced node 0's bind. torch's client backs off after such a refusal, which is what
makes its start bimodal; ``bench_rendezvous.py`` classifies torch's trials by it.
``syn_retrans`` (``TcpExt: TCPSynRetrans``) counts SYNs sent again because none was answered
(a full backlog drops them), ``listen_overflows`` the SYNs or handshakes a full accept queue
dropped.
"""

from __future__ import annotations

_FIELDS = {
    "refused": ("Tcp", "AttemptFails"),
    "connects": ("Tcp", "ActiveOpens"),
    "syn_retrans": ("TcpExt", "TCPSynRetrans"),
    "listen_overflows": ("TcpExt", "ListenOverflows"),
}


def counters() -> dict[str, int]:
    """The counters named in ``_FIELDS`` (missing ones, e.g. on an older kernel, are absent)."""
    table: dict[tuple[str, str], int] = {}
    for name in ("snmp", "netstat"):
        try:
            with open(f"/proc/self/net/{name}") as stats:
                lines = stats.read().splitlines()
        except OSError:
            continue
        for header, values in zip(lines[::2], lines[1::2], strict=False):
            group, _, keys = header.partition(":")
            for key, value in zip(keys.split(), values.partition(":")[2].split(), strict=False):
                table[group, key] = int(value)
    return {name: table[key] for name, key in _FIELDS.items() if key in table}


def since(before: dict[str, int]) -> dict[str, int]:
    """How much each counter grew since ``before`` (from ``counters()``)."""
    now = counters()
    return {name: now[name] - before[name] for name in now if name in before}
