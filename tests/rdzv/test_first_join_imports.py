"""What a process imports for its first rendezvous: all of it before the first join, but
the store server on the hosting node.

Each case runs in a fresh interpreter (``sys.modules`` of this test process says nothing),
records ``sys.modules`` after building the handler, joins a round and reports what the join
imported. A node that does not host imports nothing in its first join and never imports
asyncio; the hosting node listens first, then imports the store server and nothing else of
rdzv, and no asyncio either (the server runs a selectors loop).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rdzv.rendezvous.static import StaticTCPRendezvous
from tests.rdzv.conftest import REPO_ROOT, fresh_python

#: Modules no node should import to join (asyncio's own imports among them).
_HEAVY = ("asyncio", "ssl", "concurrent.futures", "base64")

_CHILD = """
import json, sys
form, rank, world, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import rdzv.rendezvous.static, rdzv.rendezvous.registry  # what the import lines load, at once
before_build = set(sys.modules)
if form == "class":
    from rdzv import StaticTCPRendezvous
    handler = StaticTCPRendezvous("127.0.0.1", port, rank, world, "imports", 30.0)
else:
    from rdzv import RendezvousParameters, create_handler
    params = RendezvousParameters(
        "static", f"127.0.0.1:{port}", "imports", world, world, rank=rank, timeout=30
    )
    handler = create_handler(params)
built = set(sys.modules)
info = handler.next_rendezvous()
joined = set(sys.modules)
handler.shutdown()
print(json.dumps({
    "rank": info.rank,
    "imported_by_join": sorted(joined - built),
    "imported_by_build": sorted(built - before_build),
    "at_build": sorted(built),
}), flush=True)
"""


def _run_child(form: str, rank: int, world: int, port: int) -> dict[str, Any]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, form, str(rank), str(world), str(port)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


@contextlib.contextmanager
def _host_in_this_process(world: int) -> Iterator[int]:
    """Node 0 of a ``world``-node round, joining in a thread of this process; yields its port
    (a socket bound here, port 0, handed to node 0 to listen on)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    handler = StaticTCPRendezvous(
        "127.0.0.1", port, 0, world, "imports", 30.0, listen_fd=sock.detach()
    )
    failure: list[BaseException] = []

    def join() -> None:
        try:
            handler.next_rendezvous()
        except BaseException as exc:  # reported by the test below
            failure.append(exc)

    thread = threading.Thread(target=join, daemon=True)
    thread.start()
    try:
        yield port
        thread.join(timeout=60)
        assert not thread.is_alive(), "node 0 did not return"
        assert not failure, failure
    finally:
        handler.shutdown()
        thread.join(timeout=10)


#: The store server's own modules: what the hosting node imports in its first join.
_SERVER_SIDE = {
    "rdzv.store.server",
    "rdzv.store.server._bind",
    "rdzv.store.server._server",
    "rdzv.store.state",
    "rdzv.store.server._conn",
    "rdzv.store.server._loop",
    "rdzv.store.server._bounds",
    "rdzv.store.wire._decoder",
    "rdzv.store.server._droplog",
    "rdzv.store.server._descriptors",
    "rdzv.store.state._fast",
    "rdzv.store.state._kv",
    "rdzv.store.state._writers",
}


@pytest.mark.parametrize("form", ["class", "create_handler"])
def test_the_hosting_nodes_first_join_imports_only_the_store_server_and_no_asyncio(
    form: str,
) -> None:
    result = _run_child(form, 0, 1, 0)
    assert result["rank"] == 0
    joined = result["imported_by_join"]
    assert "rdzv.store.server._server" in joined
    assert {m for m in joined if m.startswith("rdzv")} <= _SERVER_SIDE
    assert not [m for m in _HEAVY if m in joined]


@pytest.mark.parametrize("form", ["class", "create_handler"])
def test_a_node_that_does_not_host_imports_nothing_new_and_no_asyncio(form: str) -> None:
    with _host_in_this_process(2) as port:
        result = _run_child(form, 1, 2, port)
    assert result["rank"] == 1
    assert result["imported_by_join"] == []
    assert "rdzv.store.client" in result["at_build"]
    assert not [m for m in _HEAVY if m in result["at_build"]]
    assert "rdzv.store.server" not in result["at_build"]


@pytest.mark.parametrize("form", ["class", "create_handler"])
def test_building_a_handler_imports_nothing(form: str) -> None:
    # A module imported there is imported by every node of a rendezvous at once, after the
    # start: reading the machine's boot id as text used to import its codec (about 1 ms of
    # CPU in a freshly forked node, half of what building the handler cost).
    with _host_in_this_process(2) as port:
        result = _run_child(form, 1, 2, port)
    assert result["imported_by_build"] == []


def test_importing_the_class_imports_no_asyncio_and_no_server() -> None:
    code = (
        "import json, sys\nfrom rdzv import StaticTCPRendezvous\nprint(json.dumps([*sys.modules]))"
    )
    stdout, _ = fresh_python(code)
    modules = set(json.loads(stdout[-1]))
    assert "rdzv.store.client" in modules
    assert not [m for m in (*_HEAVY, "rdzv.store.server") if m in modules]


#: Standard-library modules the import line leaves out (a few ms of CPU on every node): each
#: is imported only where an uncommon path needs it (logging once the application imported
#: it; ipaddress for IPv6 endpoints and the hosting node's bind; urllib.parse for run ids
#: that need quoting), or not at all (typing: rdzv's modules import it only for type
#: checkers, under ``TYPE_CHECKING = False`` / ``if TYPE_CHECKING:``).
_NOT_ON_THE_IMPORT_LINE = (
    "logging",
    "dataclasses",
    "inspect",
    "pathlib",
    "ipaddress",
    "urllib",
    "typing",
)


@pytest.mark.parametrize(
    "line", ["from rdzv import StaticTCPRendezvous", "from rdzv import create_handler"]
)
def test_the_import_line_imports_no_logging_dataclasses_pathlib_or_typing(line: str) -> None:
    # Compared with what the interpreter had before the line: a development install's
    # start-up hook may import pathlib and the like itself.
    code = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"{line}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    stdout, _ = fresh_python(code)
    added = json.loads(stdout[-1])
    assert [m for m in added if m.partition(".")[0] in _NOT_ON_THE_IMPORT_LINE] == []
