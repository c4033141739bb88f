"""What runs inside Ray: a node group (K nodes of one run) and a host's proxy agent.

Both are plain classes; :mod:`harness.world.ray.world` makes them Ray actors
(``ray.remote(NodeGroup).options(...)``), so this module imports nothing of Ray and the
harness must be importable on every host of the cluster.

* :class:`NodeGroup` hosts its nodes exactly as a packed process does
  (:func:`harness.world.process.packed.host`, on a thread of the actor): each node a thread with
  its own handler, sockets, events and outcome; ``("start" | "kill" | "resume", incarnation,
  ...)`` commands go in through :meth:`~NodeGroup.command`; the nodes' messages, stamped on
  this host's monotonic clock, come out through :meth:`~NodeGroup.drain` (a long poll the
  world keeps open). The group of node 0 also binds the store's socket on its host's address
  at once (bound, not listening: until node 0 listens, connections are refused, as in the
  field) and hands it to node 0 at its first start.
* :class:`ProxyAgent` runs the embedded Toxiproxy-API server on its host (the links of the
  nodes there, upstream to node 0's host) and sends signals to the node groups on its host
  (pause and resume of a group that is one node: SIGSTOP/SIGCONT of the whole actor).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import threading
import time
from dataclasses import replace
from typing import Any, Final

from harness.proxy.api import ToxiproxyServer
from harness.proxy.process import ProxyProcess, start_all, stop_all
from harness.world.process.node import NodeSpec
from harness.world.process.packed import host

__all__ = ["NodeGroup", "ProxyAgent"]

#: The longest a :meth:`NodeGroup.drain` call waits for messages before it returns none.
DRAIN_WAIT: Final = 0.5


class _Commands:
    """The command stream of :func:`~harness.world.process.packed.host`: ``recv`` blocks, and
    raises ``EOFError`` once :meth:`close` was called and every command was taken."""

    def __init__(self) -> None:
        self._items: list[tuple[Any, ...]] = []
        self._closed = False
        self._cond = threading.Condition()

    def put(self, command: tuple[Any, ...]) -> bool:
        with self._cond:
            if self._closed:
                return False
            self._items.append(command)
            self._cond.notify()
            return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def recv(self) -> tuple[Any, ...]:
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            if self._items:
                return self._items.pop(0)
            raise EOFError("the world closed the node group")


class _Outbox:
    """The nodes' channel: ``send`` from any node thread, :meth:`take` from the world."""

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._ended = False
        self._cond = threading.Condition()

    def send(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify()

    def take(self, wait: float) -> tuple[list[Any], bool]:
        with self._cond:
            if not self._items and not self._ended:
                self._cond.wait(wait)
            items, self._items = self._items, []
            return items, self._ended and not items


class NodeGroup:
    """K nodes of one run in this actor; see the module docstring.

    Args:
        placement: the report's placement text of its nodes.
        store_address: for node 0's group only: the address of this host to bind the
            store's port on (port 0, read back by :meth:`store_port`).
    """

    def __init__(self, placement: str, store_address: str | None = None) -> None:
        self._commands = _Commands()
        self._outbox = _Outbox()
        self._store: socket.socket | None = None
        if store_address is not None:
            family = socket.AF_INET6 if ":" in store_address else socket.AF_INET
            self._store = socket.socket(family, socket.SOCK_STREAM)
            self._store.bind((store_address, 0))
        # The start gate of this group's nodes: they wait until release() closes its write
        # end (a group made after the release is released as soon as it is adopted).
        self._gate, self._gate_w = os.pipe()
        self._gate_lock = threading.Lock()
        self._thread = threading.Thread(
            target=host,
            args=(self._outbox, self._commands, None, placement, self._gate),
            name="harness-node-group",
            daemon=True,
        )
        self._thread.start()

    def release(self) -> None:
        """Open the start gate: the nodes waiting at it go on now (idempotent)."""
        with self._gate_lock:
            writer, self._gate_w = self._gate_w, -1
        if writer >= 0:
            os.close(writer)

    def where(self) -> dict[str, Any]:
        """This actor's PID and its host's monotonic clock now (to convert times)."""
        return {"pid": os.getpid(), "now": time.monotonic()}

    def preload(self, modules: list[str]) -> dict[str, Any]:
        """Import ``modules`` now (a spare's first node then builds its handler warm);
        returns :meth:`where`."""
        for module in modules:
            importlib.import_module(module)
        return self.where()

    def store_port(self) -> int:
        """The port node 0's store will serve on (0: this is not node 0's group)."""
        return 0 if self._store is None else int(self._store.getsockname()[1])

    def command(self, command: tuple[Any, ...]) -> bool:
        """Pass a command to the nodes (False: the group was closed). A node 0 started for
        the first time gets the store's socket (later starts bind the port themselves)."""
        if command[0] == "start" and self._store is not None:
            spec: NodeSpec = command[2]
            if spec.node == 0:
                sock, self._store = self._store, None
                try:
                    command = (*command[:2], replace(spec, listen_fd=os.dup(sock.fileno())))
                finally:
                    sock.close()
        return self._commands.put(command)

    def drain(self, wait: float = DRAIN_WAIT) -> tuple[list[Any], bool]:
        """The nodes' messages since the last call, ``(incarnation, message)`` each, waiting
        up to ``wait`` seconds for the first; and whether the group has ended (closed, and
        every node thread that was not killed done)."""
        return self._outbox.take(wait)

    def close(self) -> None:
        """No more commands: the group ends once its live node threads have."""
        self._commands.close()
        if self._store is not None:
            self._store.close()
            self._store = None


class ProxyAgent:
    """The embedded Toxiproxy-API server on this host, and signals for its node groups.

    Args:
        address: this host's address, where the API listens (the links listen on
            127.0.0.1: only nodes on this host use them).
        seed: the seed of the server's random choices (toxicity rolls, jitter).
    """

    def __init__(self, address: str, seed: int) -> None:
        self._address, self._seed = address, seed
        self._server = ToxiproxyServer(host=address, seed=seed).start()
        self._processes: list[ProxyProcess] = []

    def api(self) -> tuple[str, int]:
        """Where the Toxiproxy API listens."""
        return self._server.host, self._server.port

    def more(self, count: int) -> list[tuple[str, int]]:
        """Start ``count`` proxy processes on this host (more links than this one holds:
        see ``LINKS_PER_PROXY``), seeded alike; where each one's API listens."""
        started, clients = start_all(count, self._address, self._seed)
        self._processes += started
        return [(client.host, client.port) for client in clients]

    def signal(self, pid: int, signum: int) -> bool:
        """Send ``signum`` to process ``pid`` on this host (False: it is gone)."""
        try:
            os.kill(pid, signal.Signals(signum))
        except ProcessLookupError:
            return False
        return True

    def end(self, pid: int, within: float) -> bool:
        """SIGKILL process ``pid`` on this host and wait, at most ``within`` seconds, until
        it has exited (gone, or a zombie its parent has not reaped): True once it has.
        ``ray.kill`` returns before the actor's process ends (a stopped one ends only when
        Ray's own kill gets to it), and a replacement must not start beside it."""
        deadline = time.monotonic() + within
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return True
        while _running(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def stop(self) -> None:
        """Stop the server and the proxy processes (their links close with them)."""
        stop_all(self._processes)
        self._server.stop()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
