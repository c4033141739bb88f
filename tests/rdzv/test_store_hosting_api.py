"""The store's API for a process that hosts it (docs/store.md, *Hosting a store*): a listener
made before the server is imported, the server a master hosts, and nothing private."""

from __future__ import annotations

import os
import socket

import pytest

from rdzv.rendezvous._connection import hosted_server
from rdzv.store.base import HashStore
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer, listen_ahead


def _port_of(fd: int) -> int:
    sock = socket.socket(fileno=os.dup(fd))
    try:
        port: int = sock.getsockname()[1]
        return port
    finally:
        sock.close()


def test_a_listener_made_ahead_is_adopted_by_the_server_and_served() -> None:
    fd = listen_ahead("127.0.0.1", 0)
    assert fd is not None
    port = _port_of(fd)
    with StoreServer("127.0.0.1", port, listen_fd=fd) as server:
        assert server.port == port
        client = TCPStore("127.0.0.1", port, None, False, 10)
        try:
            client.set("k", "v")
            assert client.get("k") == b"v"
        finally:
            client.close()


@pytest.mark.skipif(not socket.has_ipv6, reason="localhost has one address without IPv6")
def test_listen_ahead_leaves_a_host_with_two_listen_addresses_to_the_server() -> None:
    assert listen_ahead("localhost", 0) is None


def test_listen_ahead_leaves_a_port_this_process_serves_to_the_server() -> None:
    with StoreServer("127.0.0.1", 0) as server:
        assert listen_ahead("127.0.0.1", server.port) is None


def test_the_hosted_server_is_a_masters_server_and_none_for_a_client_or_another_store() -> None:
    master = TCPStore("127.0.0.1", 0, None, True, 10, wait_for_workers=False)
    try:
        assert master.server is not None
        assert hosted_server(master) is master.server
        client = master.clone()
        try:
            assert hosted_server(client) is None
        finally:
            client.close()
        assert hosted_server(HashStore()) is None
    finally:
        master.close()
