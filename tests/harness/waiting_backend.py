"""A ``module:factory`` backend whose nodes say they are running, then wait to be killed
(for the tests that interrupt a run). Node processes import it by name.

Each node connects to ``127.0.0.1:$HARNESS_TEST_READY_PORT`` (a socket the test listens
on), sends ``RANK PID``, and blocks reading until the harness kills it (or the test closes
the connection, after which it fails).
"""

from __future__ import annotations

import os
import socket
from typing import Any

READY_PORT = "HARNESS_TEST_READY_PORT"


class _Waiting:
    def __init__(self, params: Any) -> None:
        self.rank = int(params.config["rank"])

    def next_rendezvous(self) -> Any:
        port = int(os.environ[READY_PORT])
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(f"{self.rank} {os.getpid()}\n".encode())
            conn.recv(1)  # returns only when the test lets go: the harness should kill first
        raise RuntimeError(f"waiting rank {self.rank} was released instead of killed")

    def shutdown(self) -> bool:
        return True


def waiting(params: Any) -> _Waiting:
    """A handler that reports in and then waits until it is killed."""
    return _Waiting(params)
