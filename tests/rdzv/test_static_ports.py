"""Port faults at node 0: the port is taken, or something that is not a store answers."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator

import pytest
from static_node_proc import Cluster, cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def nodes() -> Iterator[Cluster]:
    with cluster() as group:
        yield group


def _spec(port: int, rank: int, timeout: float) -> dict:
    return {
        "endpoint": f"127.0.0.1:{port}",
        "world_size": 4,
        "config": {"rank": rank, "timeout": timeout},
        "steps": ["rdzv"],
    }


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    """Holds a loopback port without listening: node 0 cannot bind it, dials are refused.

    Bound without ``SO_REUSEADDR``, as a process that merely holds the port would be: with
    the flag on both sides, Linux lets a second socket bind a port held by one that does not
    listen."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock
    finally:
        sock.close()


@pytest.fixture
def foreign_service() -> Iterator[int]:
    """Listens on a loopback port and answers every connection like an HTTP server."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()
        thread.join(10)


def test_port_in_use_fails_node_0_at_once_and_the_others_at_their_deadline(
    nodes: Cluster, squatter: socket.socket
) -> None:
    port = squatter.getsockname()[1]
    nodes.start("n0", _spec(port, 0, 600))
    nodes.finish("n0")  # at once: within the 120 s step bound, far below its 600 s deadline
    for rank in (1, 2, 3):
        nodes.start(f"n{rank}", _spec(port, rank, 2))
    nodes.finish()

    failure = nodes.nodes["n0"].last()
    assert failure["error"] == "RendezvousConnectionError", failure
    assert f"127.0.0.1:{port}" in failure["message"]
    assert "errno 98" in failure["message"] and "EADDRINUSE" in failure["message"]
    for rank in (1, 2, 3):
        failure = nodes.nodes[f"n{rank}"].last()
        assert failure["error"] == "RendezvousConnectionError", failure
        message = failure["message"]
        assert f"no rendezvous store answered at 127.0.0.1:{port}" in message
        assert re.search(r"\d+ connection attempt", message)
        assert "ConnectionRefusedError" in message  # the last cause
        attempts = [e for e in nodes.nodes[f"n{rank}"].events if e["event"] == "connect_attempt"]
        assert len(attempts) >= 2  # it retried until its deadline


def test_a_foreign_service_on_the_port_is_reported_as_not_a_rendezvous_store(
    nodes: Cluster, foreign_service: int
) -> None:
    for rank in (1, 2):
        nodes.start(f"n{rank}", _spec(foreign_service, rank, 2))
    nodes.finish()

    for rank in (1, 2):
        failure = nodes.nodes[f"n{rank}"].last()
        assert failure["error"] == "RendezvousConnectionError", failure
        assert f"127.0.0.1:{foreign_service}" in failure["message"]
        assert "not a rendezvous store" in failure["message"]
