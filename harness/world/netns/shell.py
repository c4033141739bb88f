"""Running ``ip``, ``nft`` and ``tc`` for the netns world, and what this machine can do.

The netns world shells out to iproute2 and nftables (the tools that document the kernel's
interfaces; one ``ip -batch`` per namespace keeps a large build fast) instead of speaking
netlink itself. :func:`run` raises a :class:`~harness.errors.HarnessError` that names the
command, its input and what the tool said. :func:`why_not` says why this machine cannot
host the world (not root, a tool missing, no network namespaces), checked once per process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Final

from harness.errors import HarnessError

__all__ = ["has_netem", "in_namespace", "run", "why_not"]

_TIMEOUT: Final = 60.0
_TOOLS: Final = {
    "ip": "iproute2",
    "nft": "nftables (apt-get install -y nftables)",
    "tc": "iproute2",
}


def in_namespace(name: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the named namespace (``ip netns exec``)."""
    return ["ip", "netns", "exec", name, *argv]


def run(argv: Sequence[str], stdin: str | None = None, check: bool = True) -> str:
    """Run ``argv`` (with ``stdin``) and return its output.

    Raises:
        HarnessError: it failed (``check``) or could not run; the message names the
            command, the first lines of its input and what it said.
    """
    try:
        done = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise HarnessError(f"netns world: could not run {' '.join(argv)!r}: {exc}") from exc
    if check and done.returncode != 0:
        shown = "" if stdin is None else "\n  input: " + " | ".join(stdin.splitlines()[:3])
        said = (done.stderr or done.stdout).strip()
        raise HarnessError(
            f"netns world: {' '.join(argv)!r} failed (exit {done.returncode}): {said}{shown}"
        )
    return done.stdout


@functools.cache
def why_not() -> str | None:
    """Why this machine cannot run the netns world, or None when it can."""
    if os.geteuid() != 0:
        return "the netns world needs root (network namespaces, nftables); run as root"
    for tool, package in _TOOLS.items():
        if shutil.which(tool) is None:
            return f"the netns world needs {tool!r} on PATH (from {package})"
    if not os.path.exists("/proc/self/ns/net"):
        return "this kernel has no network namespaces"
    return None


@functools.cache
def has_netem() -> bool:
    """Whether the kernel has ``sch_netem`` (delay and jitter in the kernel): tried in a
    scratch namespace of this process's, never assumed."""
    name = f"harness-{os.getpid()}-00000000-sw"  # found by a later sweep if left
    try:
        run(["ip", "netns", "add", name])
    except HarnessError:
        return False
    try:
        done = subprocess.run(
            ["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )
        return done.returncode == 0
    finally:
        run(["ip", "netns", "del", name], check=False)
