"""Listen addresses and listening sockets of the proxy (harness.proxy.netaddr)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from harness.proxy.netaddr import bind_listen, resolve_listen


def _no_lookup(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"getaddrinfo was called for {args[:2]}")


@pytest.mark.parametrize(
    ("listen", "family", "address"),
    [
        ("127.0.0.1:0", socket.AF_INET, ("127.0.0.1", 0)),
        ("[::0001]:7", socket.AF_INET6, ("::1", 7)),
    ],
)
def test_a_numeric_listen_address_is_resolved_without_a_lookup(
    monkeypatch: pytest.MonkeyPatch,
    listen: str,
    family: socket.AddressFamily,
    address: tuple[str, int],
) -> None:
    # a lookup runs on the loop's resolver thread: a thread switch per link, 10,240 of them
    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", _no_lookup)
    assert asyncio.run(resolve_listen(listen)) == (family, address)


def test_a_listen_address_naming_a_host_is_still_looked_up() -> None:
    family, (host, port) = asyncio.run(resolve_listen("localhost:0"))
    assert (family, host, port) == (socket.AF_INET, "127.0.0.1", 0)


def test_a_listener_on_a_port_the_kernel_chose_is_reusable_yet_never_shared() -> None:
    async def bound() -> socket.socket:
        return await bind_listen("127.0.0.1:0")

    listener = asyncio.run(bound())
    try:
        # reusable: a port held while the link is down binds again past TIME_WAIT
        assert listener.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1
        port = listener.getsockname()[1]
        assert port != 0
        with socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):
                other.bind(("127.0.0.1", port))
    finally:
        listener.close()
