"""Fixtures for the store tests: every store backend behind one interface, and live servers.

``store_factory`` is parametrised over the backends the conformance suite runs against:

* ``hash``        rdzv ``HashStore``
* ``prefix``      rdzv ``PrefixStore("run1", HashStore)``
* ``tcp``         a clone of an rdzv ``TCPStore`` master on 127.0.0.1, port 0 (world_size 1,
                  so the server holds torch's internal ``init/`` key, as torch's tests do)
* ``tcp-prefix``  ``PrefixStore("run1", <that clone>)``
* ``rdzv-client->torch-server``  an rdzv ``TCPStore`` client of an in-process torch master
* ``torch-client->rdzv-server``  a torch ``TCPStore`` client of a fresh rdzv server in a
                  subprocess (torch's ``list_keys`` holds the GIL, so an in-process Python
                  server would deadlock); one child process per session hosts them all

The last two are marked ``torch`` and skip cleanly without torch. Everything a fixture
starts (stores, servers, subprocesses) is closed or killed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import pytest

import rdzv
from rdzv.errors import QueueEmptyError, StoreClosedError, StoreTimeoutError
from rdzv.events import EventCollector
from rdzv.store.base import HashStore, PrefixStore
from rdzv.store.client import TCPStore

REPO_ROOT = Path(rdzv.__file__).resolve().parent.parent
DEFAULT_TIMEOUT = timedelta(seconds=20)
PREFIX = "run1"

_SERVER_SCRIPT = """
import sys
from rdzv.store.server import StoreServer
host = sys.argv[1]
first = StoreServer(host, int(sys.argv[2])).start()
servers = {first.port: first}
print(first.port, flush=True)
for line in sys.stdin:
    command, _, arg = line.partition(" ")
    if command.strip() == "new":
        server = StoreServer(host, 0).start()
        servers[server.port] = server
        print(server.port, flush=True)
    elif command == "close":
        servers.pop(int(arg)).close()
        print("closed", arg.strip(), flush=True)
"""

BACKENDS = [
    "hash",
    "prefix",
    "tcp",
    "tcp-prefix",
    pytest.param("rdzv-client->torch-server", marks=pytest.mark.torch),
    pytest.param("torch-client->rdzv-server", marks=pytest.mark.torch),
]


def fresh_python(code: str, *args: str) -> tuple[list[str], list[str]]:
    """stdout and stderr lines of ``python -c code args`` run in a fresh interpreter from the
    repository root (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), done.stderr.splitlines()


def _read_line(proc: subprocess.Popen[str], errors: IO[str], timeout: float = 60.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        errors.seek(0)
        raise RuntimeError(
            f"the store server subprocess (pid {proc.pid}) did not answer within {timeout}s; "
            f"stderr: {errors.read()[-2000:]}"
        )
    return line.strip()


@dataclass
class ServerProcess:
    """A child process hosting rdzv ``StoreServer``s; the first one listens on ``port``.

    ``new_server``/``close_server`` start and stop more servers in the same child (cheaper
    than a process per test). The child is killed by ``pid`` when the context exits.
    """

    proc: subprocess.Popen[str]
    errors: IO[str]
    host: str
    port: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _command(self, line: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return _read_line(self.proc, self.errors)

    def new_server(self) -> int:
        """Start another server (port 0) in the child; return its port."""
        return int(self._command("new"))

    def close_server(self, port: int) -> None:
        """Close the server on ``port`` in the child."""
        assert self._command(f"close {port}") == f"closed {port}"


@contextlib.contextmanager
def spawn_store_server(host: str = "127.0.0.1", port: int = 0) -> Iterator[ServerProcess]:
    """Run a ``StoreServer`` in a subprocess; yield once it printed its port; kill it after.

    The child's stderr goes to a temporary file, never a pipe: a server that logs a warning
    per dropped connection must not block on a full pipe.
    """
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER_SCRIPT, host, str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=env,
        )
        try:
            yield ServerProcess(proc, errors, host, int(_read_line(proc, errors)))
        finally:
            proc.kill()
            proc.wait(timeout=30)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


class InThread:
    """Run ``fn(*args)`` in a daemon thread; ``started``/``done`` (and ``notify``, when
    given) are events."""

    def __init__(
        self, fn: Callable[..., Any], *args: Any, notify: threading.Event | None = None
    ) -> None:
        self.started = threading.Event()
        self.done = threading.Event()
        self._notify = notify
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()
        assert self.started.wait(10), "the helper thread did not start"

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.started.set()
        try:
            self.result = fn(*args)
        except BaseException as exc:  # handed to the test thread by outcome()
            self.error = exc
        finally:
            self.done.set()
            if self._notify is not None:
                self._notify.set()

    def outcome(self, timeout: float | None = 30.0) -> Any:
        assert self.done.wait(timeout), f"still blocked after {timeout}s"
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.result


@dataclass
class Backend:
    """One store under test plus what the tests need to know about how it differs.

    Attributes:
        name: the backend id.
        store: the store under test.
        raw: the store under ``store``'s prefix (``store`` itself when there is none).
        prefix: the PrefixStore prefix of ``store``, or None.
        wire_slash: keys travel with torch's ``/`` (and error messages show it).
        torch_client: ``store`` is a torch object (torch's error classes apply).
        internal_keys: keys the server holds that only ``num_keys`` counts (torch's
            ``init/`` worker counter, present when a master was built with a world size).
        timeout_error / queue_empty_error / dropped_error / misuse_error: what this
            backend raises for a deadline, an empty non-blocking pop, a connection the
            server dropped, and a local misuse such as ``multi_set`` length mismatch.
    """

    name: str
    store: Any
    raw: Any
    prefix: str | None
    wire_slash: bool
    torch_client: bool
    internal_keys: int
    timeout_error: type[BaseException]
    queue_empty_error: type[BaseException]
    dropped_error: type[BaseException] | None
    misuse_error: type[BaseException]
    connect_raw: Callable[[], Any]

    def other(self) -> Any:
        """Another client (its own connection where there are connections) of the same
        keys as ``store``: same prefix, same server."""
        raw = self.connect_raw()
        return raw if self.prefix is None else self.wrap(raw, self.prefix)

    def fresh_raw(self) -> Any:
        """A new raw connection (for checks after this one was dropped)."""
        return self.connect_raw()

    def wrap(self, store: Any, prefix: str) -> Any:
        """``store`` seen through a PrefixStore of the matching implementation."""
        if self.torch_client:
            dist = pytest.importorskip("torch.distributed")
            return dist.PrefixStore(prefix, store)
        return PrefixStore(prefix, store)

    def full(self, key: str) -> str:
        """The key ``raw`` stores for ``store``'s ``key``."""
        return key if self.prefix is None else f"{self.prefix}/{key}"

    def shown(self, key: str) -> str:
        """How a timeout message names ``key`` of ``store``."""
        return f"/{self.full(key)}" if self.wire_slash else self.full(key)


#: The errors an rdzv TCPStore client raises, whichever server it talks to.
RDZV_CLIENT_ERRORS: dict[str, Any] = {
    "timeout_error": StoreTimeoutError,
    "queue_empty_error": QueueEmptyError,
    "dropped_error": StoreClosedError,
    "misuse_error": ValueError,
}


def _rdzv_tcp(name: str, cleanups: list[Callable[[], None]]) -> Backend:
    master = TCPStore("127.0.0.1", 0, 1, True, DEFAULT_TIMEOUT)
    cleanups.append(master.close)

    def connect() -> TCPStore:
        client = master.clone()
        cleanups.append(client.close)
        return client

    raw = connect()
    prefixed = name == "tcp-prefix"
    return Backend(
        name=name,
        store=PrefixStore(PREFIX, raw) if prefixed else raw,
        raw=raw,
        prefix=PREFIX if prefixed else None,
        wire_slash=True,
        torch_client=False,
        internal_keys=1,
        **RDZV_CLIENT_ERRORS,
        connect_raw=connect,
    )


def _rdzv_client_torch_server(name: str, cleanups: list[Callable[[], None]]) -> Backend:
    dist = pytest.importorskip("torch.distributed")
    holder: list[Any] = [dist.TCPStore("127.0.0.1", 0, 1, True, DEFAULT_TIMEOUT)]
    port = holder[0].port
    cleanups.append(holder.clear)  # dropping the last reference stops torch's server

    def connect() -> TCPStore:
        client = TCPStore("127.0.0.1", port, timeout=DEFAULT_TIMEOUT)
        cleanups.append(client.close)
        return client

    raw = connect()
    return Backend(
        name=name,
        store=raw,
        raw=raw,
        prefix=None,
        wire_slash=True,
        torch_client=False,
        internal_keys=1,
        **RDZV_CLIENT_ERRORS,
        connect_raw=connect,
    )


def _torch_client_rdzv_server(
    name: str, cleanups: list[Callable[[], None]], host: ServerProcess
) -> Backend:
    dist = pytest.importorskip("torch.distributed")
    port = host.new_server()
    cleanups.append(lambda: host.close_server(port))
    clients: list[Any] = []
    cleanups.append(clients.clear)  # runs before the close: cleanups run in reverse

    def connect() -> Any:
        client = dist.TCPStore(
            host.host, port, is_master=False, wait_for_workers=False, timeout=DEFAULT_TIMEOUT
        )
        clients.append(client)
        return client

    raw = connect()
    return Backend(
        name=name,
        store=raw,
        raw=raw,
        prefix=None,
        wire_slash=True,
        torch_client=True,
        internal_keys=0,
        timeout_error=dist.DistStoreError,
        queue_empty_error=dist.QueueEmptyError,
        dropped_error=dist.DistNetworkError,
        misuse_error=dist.DistStoreError,
        connect_raw=connect,
    )


def _hash(name: str, cleanups: list[Callable[[], None]]) -> Backend:
    base = HashStore(DEFAULT_TIMEOUT)
    prefixed = name == "prefix"
    return Backend(
        name=name,
        store=PrefixStore(PREFIX, base) if prefixed else base,
        raw=base,
        prefix=PREFIX if prefixed else None,
        wire_slash=False,
        torch_client=False,
        internal_keys=0,
        timeout_error=StoreTimeoutError,
        queue_empty_error=QueueEmptyError,
        dropped_error=None,
        misuse_error=ValueError,
        connect_raw=lambda: base,
    )


_MAKERS: dict[str, Callable[[str, list[Callable[[], None]]], Backend]] = {
    "hash": _hash,
    "prefix": _hash,
    "tcp": _rdzv_tcp,
    "tcp-prefix": _rdzv_tcp,
    "rdzv-client->torch-server": _rdzv_client_torch_server,
}


def _run_cleanups(cleanups: list[Callable[[], None]]) -> None:
    errors: list[BaseException] = []
    while cleanups:
        try:
            cleanups.pop()()
        except Exception as exc:  # keep cleaning; report the first failure afterwards
            errors.append(exc)
    if errors:
        raise errors[0]


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest) -> Iterator[Callable[[], Backend]]:
    """A callable that builds a fresh :class:`Backend` of the parametrised kind."""
    name: str = request.param
    cleanups: list[Callable[[], None]] = []

    def make() -> Backend:
        mine: list[Callable[[], None]] = []
        cleanups.append(lambda: _run_cleanups(mine))
        if name == "torch-client->rdzv-server":
            pytest.importorskip("torch.distributed")
            host: ServerProcess = request.getfixturevalue("server_host")
            return _torch_client_rdzv_server(name, mine, host)
        return _MAKERS[name](name, mine)

    try:
        yield make
    finally:
        _run_cleanups(cleanups)


@pytest.fixture
def backend(store_factory: Callable[[], Backend]) -> Backend:
    """One fresh store of the parametrised backend."""
    return store_factory()


@pytest.fixture(scope="session")
def server_host() -> Iterator[ServerProcess]:
    """One subprocess for the whole session that hosts a fresh rdzv server per test."""
    with spawn_store_server() as host:
        yield host


@pytest.fixture
def server_process() -> Iterator[ServerProcess]:
    """An rdzv store server in a subprocess on 127.0.0.1 (killed by PID afterwards)."""
    with spawn_store_server() as server:
        yield server


@pytest.fixture
def events() -> Iterator[EventCollector]:
    """The structured events of ``rdzv.rendezvous`` logged during the test."""
    collector = EventCollector()
    logger = logging.getLogger("rdzv.rendezvous")
    logger.addHandler(collector)
    logger.setLevel(logging.INFO)
    try:
        yield collector
    finally:
        logger.removeHandler(collector)
        logger.setLevel(logging.NOTSET)
