"""The store server grows its process's descriptor table for the clients it expects before
they come (``expected_clients``), so that no accept waits for the kernel to grow it (in a
process with threads every growth waits for an RCU grace period, while every joining node
waits for the server)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from tests.rdzv.conftest import REPO_ROOT

CLIENTS = 1500  # far beyond the table a test process inherits (256 or so)

_CHILD = """
import json, os, re, sys, threading
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer

def table():
    return int(re.search(r"FDSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

mode, clients = sys.argv[1], int(sys.argv[2])
hold = threading.Event()
other = None
if mode != "alone":  # another thread: a growth then needs a grace period
    other = threading.Thread(target=hold.wait, daemon=True)
    other.start()
marker_r, marker_w = os.pipe()
high = os.dup2(marker_r, 100)  # an open descriptor in the range the growth covers
marker = os.fstat(high).st_ino
before = table()
if mode == "store":
    store = TCPStore("127.0.0.1", 0, clients, True, wait_for_workers=False)
    server = store.server
else:
    server = StoreServer("127.0.0.1", 0, expected_clients=clients).start()
for thread in threading.enumerate():
    if thread.name == "rdzv-descriptors":
        thread.join(30)
after = table()
listener = server._sockets[0].fileno()
print(json.dumps({
    "before": before, "after": after, "listener": listener,
    "marker_kept": os.fstat(high).st_ino == marker,
    "threads_left": [t.name for t in threading.enumerate() if t.name == "rdzv-descriptors"],
}))
if mode == "store":
    store.close()
server.close()
hold.set()
if other is not None:
    other.join()
"""


def _run(mode: str, clients: int = CLIENTS) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(clients)],
        cwd=REPO_ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.fixture(autouse=True)
def _enough_descriptors() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < CLIENTS + 200:
        pytest.skip(f"the hard descriptor limit ({hard}) is below what this test grows to")


@pytest.mark.parametrize("mode", ["alone", "threaded", "store"])
def test_the_table_holds_the_expected_clients_once_the_server_started(mode: str) -> None:
    """Alone: grown in ``start()`` itself; with another thread: by a short-lived thread;
    a hosting ``TCPStore`` passes its world size. An open descriptor the growth passes
    over stays what it was."""
    result = _run(mode)
    listener = result["listener"]
    assert isinstance(listener, int)
    assert result["before"] < CLIENTS
    assert result["after"] >= listener + CLIENTS
    assert result["marker_kept"] is True
    assert result["threads_left"] == []


def test_a_server_expecting_no_one_leaves_the_table_alone() -> None:
    result = _run("alone", 0)
    assert result["after"] == result["before"]


def test_a_descriptor_limit_below_the_expected_clients_bounds_the_growth() -> None:
    """The limit is the bound: the table never grows past it, and the server starts."""
    child = """
import resource, re
import rdzv.store.server._server as server_module
server_module.raise_fd_limit = lambda: None  # keep the limit set here
resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
server = server_module.StoreServer("127.0.0.1", 0, expected_clients=5000).start()
print(re.search(r"FDSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
server.close()
"""
    done = subprocess.run(
        [sys.executable, "-c", child],
        cwd=REPO_ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) <= 256  # 200 slots round up to 256 at most, never 8192
