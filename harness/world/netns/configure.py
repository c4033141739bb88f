"""Configuring many nodes' namespaces from one thread: addresses, links up, neighbours.

An ``ip -n NS -batch`` per node costs a process that enters the namespace and remounts
``/sys`` (40 ms each on a loaded 2-core machine: 40 s for 1024 nodes). Instead one
dedicated thread of the harness enters each node's namespace in turn (setns(2) moves only
the calling thread) and configures it with the kernel's socket ioctls: address and netmask
(``SIOCSIFADDR``/``SIOCSIFNETMASK``), links up (``SIOCSIFFLAGS``), permanent neighbours
(``SIOCSARP`` with ``ATF_PERM``): microseconds per node. The thread ends when it is done;
the only other thread of the harness that enters a node's namespace is the proxy's, in
node 0's, when the run has links (:mod:`~harness.world.netns.links`).
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from harness.errors import HarnessError
from harness.world.netns.enter import enter

__all__ = ["NodeSetup", "configure"]

_SIOCGIFFLAGS: Final = 0x8913
_SIOCSIFFLAGS: Final = 0x8914
_SIOCSIFADDR: Final = 0x8916
_SIOCSIFNETMASK: Final = 0x891C
_SIOCSARP: Final = 0x8955
_IFF_UP: Final = 0x1
_ARPHRD_ETHER: Final = 1
_ATF_COM: Final = 0x02
_ATF_PERM: Final = 0x04


@dataclass(frozen=True)
class NodeSetup:
    """What one node's namespace gets.

    Attributes:
        path: the namespace's file (``/run/netns/NAME``).
        addresses: ``(device label, address, netmask)`` each (a label ``lo:1`` adds a
            second address to ``lo``).
        up: the links to bring up.
        neighbours: ``(address, MAC)`` permanent neighbours on ``eth0``.
    """

    path: str
    addresses: Sequence[tuple[str, str, str]]
    up: Sequence[str] = ("lo", "eth0")
    neighbours: Sequence[tuple[str, str]] = field(default_factory=tuple)


def _sockaddr_in(address: str) -> bytes:
    return struct.pack("=HH4s8s", socket.AF_INET, 0, socket.inet_aton(address), b"")


def _ifreq_addr(device: str, address: str) -> bytes:
    return struct.pack("=16s16s", device.encode(), _sockaddr_in(address))


def _link_up(sock: socket.socket, device: str) -> None:
    request = struct.pack("=16sH14s", device.encode(), 0, b"")
    flags = struct.unpack("=16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
    fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("=16sH14s", device.encode(), flags | _IFF_UP, b""))


def _neighbour(sock: socket.socket, address: str, mac: str) -> None:
    hardware = struct.pack("=H14s", _ARPHRD_ETHER, bytes.fromhex(mac.replace(":", "")))
    request = struct.pack(
        "=16s16si16s16s",
        _sockaddr_in(address),
        hardware,
        _ATF_COM | _ATF_PERM,
        b"",
        b"eth0",
    )
    fcntl.ioctl(sock, _SIOCSARP, request)


def _one(setup: NodeSetup) -> None:
    enter(setup.path)
    with socket.socket(
        socket.AF_INET, socket.SOCK_DGRAM
    ) as sock:  # made inside: its ioctls act there
        for device, address, netmask in setup.addresses:
            fcntl.ioctl(sock, _SIOCSIFADDR, _ifreq_addr(device, address))
            fcntl.ioctl(sock, _SIOCSIFNETMASK, _ifreq_addr(device, netmask))
        for device in setup.up:
            _link_up(sock, device)
        for address, mac in setup.neighbours:
            _neighbour(sock, address, mac)


def configure(setups: Sequence[NodeSetup]) -> None:
    """Configure every namespace of ``setups``, on a thread of its own.

    Raises:
        HarnessError: a namespace could not be entered or configured (names which, and why).
    """
    failed: list[str] = []

    def work() -> None:
        for setup in setups:
            try:
                _one(setup)
            except OSError as exc:
                failed.append(f"{os.path.basename(setup.path)}: {exc}")
                return

    thread = threading.Thread(target=work, name="harness-netns-configure", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise HarnessError(f"netns world: could not configure a node's namespace: {failed[0]}")
