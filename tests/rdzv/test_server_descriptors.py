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

from rdzv.store.server import StoreServer
from tests.rdzv.conftest import REPO_ROOT

_CHILD = """
import json, os, re, sys, threading
from rdzv.store.client import TCPStore
from rdzv.store.server import StoreServer

def table():
    return int(re.search(r"FDSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

mode, clients = sys.argv[1], int(sys.argv[2])
if clients < 0:  # past the table this process inherited, whatever its size
    clients = 2 * table() + 64
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
elif mode == "rendezvous":  # the hosting node's connection (a world of ``clients`` nodes)
    import socket
    from rdzv.rendezvous._connection import dial
    from rdzv.rendezvous._static_config import static_config
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    port = bound.getsockname()[1]
    config = {"rank": 0, "listen_fd": bound.detach()}  # the server adopts it
    cfg = static_config(host="127.0.0.1", port=port,
                        world_size=clients, run_id="r", config=config, source="test")
    store = dial(cfg, 30.0)
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
    "clients": clients, "marker_kept": os.fstat(high).st_ino == marker,
    "threads_left": [t.name for t in threading.enumerate() if t.name == "rdzv-descriptors"],
}))
if mode == "rendezvous":
    from rdzv.rendezvous._connection import close_store
    close_store(store)  # as the node does: the connection, then the server it hosts
elif mode == "store":
    store.close()
    server.close()
else:
    server.close()
hold.set()
if other is not None:
    other.join()
"""


def _python(source: str, *args: str) -> str:
    """What a fresh interpreter running ``source`` printed (it must succeed)."""
    done = subprocess.run(
        [sys.executable, "-c", source, *args],
        cwd=REPO_ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _run(mode: str, clients: int = -1) -> dict[str, object]:
    """The child's account; ``clients`` -1: twice the table it inherited, and more."""
    result: dict[str, object] = json.loads(_python(_CHILD, mode, str(clients)))
    return result


@pytest.fixture(autouse=True)
def _enough_descriptors() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard descriptor limit ({hard}) is below what this test grows to")


@pytest.mark.parametrize("mode", ["alone", "threaded", "store", "rendezvous"])
def test_the_table_holds_the_expected_clients_once_the_server_started(mode: str) -> None:
    """Alone: grown in ``start()`` itself; with another thread: by a short-lived thread;
    a hosting ``TCPStore`` passes its world size, and so does the rendezvous's hosting
    node. An open descriptor the growth passes over stays what it was."""
    result = _run(mode)
    listener, clients, before = result["listener"], result["clients"], result["before"]
    assert isinstance(listener, int) and isinstance(clients, int) and isinstance(before, int)
    assert before < clients
    assert result["after"] >= listener + clients
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
def table():
    return re.search(r"FDSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
before = table()
server = server_module.StoreServer("127.0.0.1", 0, expected_clients=5000).start()
print(before, table())
server.close()
"""
    before, after = (int(size) for size in _python(child).split())
    assert after <= max(before, 256)  # 200 slots round up to 256 at most, never 8192


@pytest.mark.parametrize("bad", [-1, 2.5, "64", True])
def test_expected_clients_that_is_not_a_count_is_refused_with_the_value(bad: object) -> None:
    with pytest.raises(ValueError, match="expected_clients") as raised:
        StoreServer("127.0.0.1", 0, expected_clients=bad)  # type: ignore[arg-type]
    assert repr(bad) in str(raised.value) or str(bad) in str(raised.value)
