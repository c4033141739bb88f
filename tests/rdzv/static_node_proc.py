"""Real node processes for the static rendezvous tests (not a test module).

Each node runs in its own OS process (a forkserver child with rdzv preloaded), builds its
handler through rdzv's registry, runs a list of steps and streams what happened to the
parent over one queue: ``("event", node, payload)`` for rdzv events as they happen,
``("step", node, record)`` for each step, ``("done", node, None)`` at the end.

A spec's ``member_grace`` sets the hosting node's grace for a vanished member's restart
(``rdzv.rendezvous._lost_member.MEMBER_GRACE``) in that process.

Steps: ``rdzv`` (next_rendezvous), ``share`` (write a key through the returned store and
read every rank's), ``set_closed``, ``is_closed``, ``num_waiting``, ``shutdown``,
``cleanup`` (``shutdown``, run even after a failed step, as the harness's node does), ``await``
(block until the parent sends "go" on the node's command queue), ``exit`` (``os._exit(0)``
at once: no cleanup, like a process that simply ends). A failing step ends the node.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import select
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rdzv

STEP_TIMEOUT = 120.0  # bound of every blocking wait in the parent and the children
_EVENTS = {
    "connect_attempt",
    "connected",
    "join_start",
    "joined",
    "complete",
    "failed",
    "server_listening",
    "member_vanished",
}


class _Forward(logging.Handler):
    def __init__(self, out: Any, name: str) -> None:
        super().__init__(logging.DEBUG)
        self.out = out
        self.name_ = name

    def emit(self, record: logging.LogRecord) -> None:
        payload = getattr(record, "rdzv_event", None)
        if isinstance(payload, dict) and payload.get("event") in _EVENTS:
            self.out.put(("event", self.name_, dict(payload, t=record.created)))


def node_main(spec: dict[str, Any], out: Any, commands: Any) -> None:
    """Child entry point: run ``spec["steps"]`` and report each outcome on ``out``."""
    from rdzv.rendezvous.api import RendezvousParameters
    from rdzv.rendezvous.registry import get_rendezvous_handler

    name = spec["name"]
    logger = logging.getLogger("rdzv")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Forward(out, name))
    if "member_grace" in spec:  # a hosting node's grace for a vanished member's restart
        import rdzv.rendezvous._lost_member

        setattr(rdzv.rendezvous._lost_member, "MEMBER_GRACE", spec["member_grace"])  # noqa: B010
    config = dict(spec.get("config", {}))
    listen: socket.socket | None = spec.get("listen")
    if listen is not None:
        config["listen_fd"] = listen.detach()  # the store server takes ownership
    info = None
    try:
        params = RendezvousParameters(
            backend="static",
            endpoint=spec["endpoint"],
            run_id=spec.get("run_id", "run"),
            min_nodes=spec["world_size"],
            max_nodes=spec["world_size"],
            **config,
        )
        handler = get_rendezvous_handler(params)
        for step in spec["steps"]:
            record: dict[str, Any] = {"step": step, "pid": os.getpid()}
            try:
                if step == "rdzv":
                    info = handler.next_rendezvous()
                    record.update(rank=info.rank, world_size=info.world_size)
                elif step == "share":
                    assert info is not None
                    info.store.set(f"rank{info.rank}", name)
                    record["seen"] = [
                        info.store.get(f"rank{r}").decode() for r in range(info.world_size)
                    ]
                elif step == "set_closed":
                    handler.set_closed()
                elif step == "is_closed":
                    record["value"] = handler.is_closed()
                elif step == "num_waiting":
                    record["value"] = handler.num_nodes_waiting()
                elif step in ("shutdown", "cleanup"):
                    record["value"] = handler.shutdown()
                elif step == "await":
                    record["value"] = commands.get(timeout=STEP_TIMEOUT)
                elif step == "exit":
                    out.close()
                    out.join_thread()
                    os._exit(0)
                else:
                    raise ValueError(f"unknown step {step!r}")
            except Exception as exc:
                record.update(error=type(exc).__name__, message=str(exc), t=time.time())
                out.put(("step", name, record))
                if "cleanup" in spec["steps"]:  # as the harness's node does, in a finally
                    out.put(("step", name, _cleanup(handler)))
                break
            record["t"] = time.time()
            out.put(("step", name, record))
    except Exception as exc:
        out.put(("step", name, {"step": "setup", "error": type(exc).__name__, "message": str(exc)}))
    out.put(("done", name, None))


def _cleanup(handler: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"step": "cleanup", "pid": os.getpid()}
    try:
        record["value"] = handler.shutdown()
    except Exception as exc:
        record.update(error=type(exc).__name__, message=str(exc))
    record["t"] = time.time()
    return record


@dataclass
class Node:
    name: str
    process: Any
    commands: Any
    steps: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False

    def last(self) -> dict[str, Any]:
        return self.steps[-1]

    def step(self, kind: str) -> dict[str, Any]:
        return next(s for s in self.steps if s["step"] == kind)

    def event_names(self) -> list[str]:
        return [e["event"] for e in self.events]


class Cluster:
    """Starts node processes, gathers their reports, kills leftovers by PID."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.out = ctx.Queue()
        self.nodes: dict[str, Node] = {}

    def start(self, name: str, spec: dict[str, Any]) -> Node:
        commands = self.ctx.Queue()
        process = self.ctx.Process(
            target=node_main, args=(dict(spec, name=name), self.out, commands), daemon=True
        )
        process.start()
        node = Node(name, process, commands)
        self.nodes[name] = node
        return node

    def pump(self, until: Callable[[], bool], timeout: float = STEP_TIMEOUT) -> None:
        """Consume reports until ``until()`` holds; fail the test after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not until():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"cluster did not reach the expected state: {self.state()}")
            try:
                kind, name, payload = self.out.get(timeout=remaining)
            except queue.Empty:
                continue
            node = self.nodes[name]
            if kind == "event":
                node.events.append(payload)
            elif kind == "step":
                node.steps.append(payload)
            else:
                node.done = True

    def finish(self, *names: str, timeout: float = STEP_TIMEOUT) -> None:
        wanted = names or tuple(self.nodes)
        self.pump(lambda: all(self.nodes[n].done for n in wanted), timeout)
        for n in wanted:
            self.nodes[n].process.join(timeout)

    def state(self) -> dict[str, Any]:
        return {
            n: (node.done, node.steps[-1:] if node.steps else []) for n, node in self.nodes.items()
        }

    def close(self) -> None:
        for node in self.nodes.values():
            process = node.process
            if process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, 9)
            process.join(10)
            node.commands.close()
        self.out.close()


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [
            "rdzv.rendezvous.static",
            "rdzv.store.client",
            "rdzv.rendezvous.registry",
            "static_node_proc",
        ]
    )
    group = Cluster(ctx)
    try:
        yield group
    finally:
        group.close()


def reserved_port() -> socket.socket:
    """A loopback socket bound to port 0 and not listening: connects to it are refused.

    With ``SO_REUSEADDR``, as a launcher that pre-binds a server port sets it (and as rdzv
    binds its own): the connections node 0 accepts on it inherit the flag, so once node 0
    has closed them, the port can be bound again at once even while a peer has not closed
    its end yet (the server's end then lingers in FIN_WAIT2, which only blocks a bind when
    the listener lacked the flag)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


# The node that crashes runs outside the cluster's shared report queue: a process killed
# while it holds that queue's lock would block every other node's reports.
_CRASHING_NODE = """
import logging, sys
from rdzv.rendezvous.api import RendezvousParameters
from rdzv.rendezvous.registry import get_rendezvous_handler

class Say(logging.Handler):
    def emit(self, record):
        event = getattr(record, "rdzv_event", None)
        if event is not None:
            print(event["event"], flush=True)

logger = logging.getLogger("rdzv")
logger.setLevel(logging.INFO)
logger.addHandler(Say())
params = RendezvousParameters(
    "static", sys.argv[1], "run", 4, 4, rank=2, timeout=60
)
get_rendezvous_handler(params).next_rendezvous()
"""


@contextlib.contextmanager
def python_process(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -c code args`` with this rdzv on its path, stdin and stdout piped (stderr
    dropped); killed on the way out."""
    env = dict(os.environ, PYTHONPATH=str(Path(rdzv.__file__).resolve().parent.parent))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=60)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def crashing_node(endpoint: str) -> contextlib.AbstractContextManager[subprocess.Popen[str]]:
    """Rank 2 of a 4-node run at ``endpoint`` (join timeout 60 s) in a process of its own
    that prints the name of each rdzv event on its stdout; killed on the way out."""
    return python_process(_CRASHING_NODE, endpoint)


def wait_for_line(proc: subprocess.Popen[str], wanted: str, timeout: float = 60.0) -> None:
    """Block until ``proc`` prints the line ``wanted``; fail if it ends or ``timeout`` passes.

    Reads the pipe's descriptor itself, never through ``proc.stdout``: ``select`` sees only
    what is still in the pipe, so a buffered ``readline`` that took several lines out at once
    (they arrive together when this process is slow to read, on a loaded machine) would
    leave the later ones unseen until the node writes again. Lines after ``wanted`` are kept
    for the next call.
    """
    assert proc.stdout is not None
    fd, buffer = proc.stdout.fileno(), _UNREAD.setdefault(proc, bytearray())
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        while (end := buffer.find(b"\n")) >= 0:
            line = buffer[:end].decode(errors="replace").strip()
            del buffer[: end + 1]
            if line == wanted:
                return
            seen.append(line)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # the process ended
            buffer += chunk
    raise AssertionError(f"the node (pid {proc.pid}) never reported {wanted!r}; it printed {seen}")


# What wait_for_line read from a process's pipe past the line it waited for.
_UNREAD: weakref.WeakKeyDictionary[subprocess.Popen[str], bytearray] = weakref.WeakKeyDictionary()


def four_node_spec(port: int, rank: int, steps: list[str]) -> dict[str, object]:
    """The spec of rank ``rank`` of a 4-node run at 127.0.0.1:``port`` (join timeout 60 s,
    the crashing node's) running ``steps``."""
    return {
        "endpoint": f"127.0.0.1:{port}",
        "world_size": 4,
        "config": {"rank": rank, "timeout": 60},
        "steps": steps,
    }
