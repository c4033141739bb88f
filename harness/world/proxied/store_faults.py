"""Store-level faults: an interposer that understands the TCPStore protocol.

An L4 proxy sees bytes; this one decodes each client request with rdzv's wire codec, so a
fault can target *one operation on matching keys* — "delay the WAIT on ``*/complete``",
"swallow the first ADD on ``*/joined``", "reset the connection on the GET of
``*/MASTER_ADDR``" — which no L4 proxy can do.

Actions (each rule fires ``count`` times, on connections of the nodes it names):

* ``delay``: hold the matching request (and, to keep order, all that follow it on that
  connection) for ``delay`` seconds, then forward it;
* ``drop``: swallow the matching request and forward nothing more from that client (its
  replies stop, as if the store went silent for it); replies already due still flow back;
* ``fail``: close the client's connection instead of forwarding the request.

The interposer listens once per node (so it knows whose request it sees) and relays to one
upstream store address; it runs on its own event loop thread. A rule is a plain value
(:class:`~harness.world.specs.StoreRule`); whether it matches a request is decided here
(:func:`matches`), and each firing is counted in the rule (``fired``; ``acted`` is what the
report shows as what the fault did).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from harness.world.specs import StoreRule
from rdzv.store.wire import _decoder, _wire

__all__ = ["StoreFaultProxy", "matches", "request_keys", "request_op"]


def request_op(req: _wire.Request) -> str:
    """The opcode name of a request (``"WAIT"``, ``"MULTI_GET"``...)."""
    return req.op.name


def request_keys(req: _wire.Request) -> list[str]:
    """The keys a request names, as text without torch's leading ``/``."""
    raw: list[bytes]
    match req:
        case _wire.Check(keys) | _wire.Wait(keys) | _wire.MultiGet(keys):
            raw = list(keys)
        case _wire.MultiSet(items):
            raw = [k for k, _ in items]
        case _:
            key = getattr(req, "key", None)
            raw = [] if key is None else [key]
    return [k.decode(errors="replace").removeprefix("/") for k in raw]


def matches(rule: StoreRule, node: int, req: _wire.Request) -> bool:
    """True if ``rule`` still has firings left and applies to ``req`` from ``node``."""
    if rule.fired >= rule.count or rule.op not in ("*", request_op(req)):
        return False
    if rule.nodes is not None and node not in rule.nodes:
        return False
    return any(fnmatch.fnmatchcase(k, rule.keys) for k in request_keys(req))


@dataclass
class _Listener:
    node: int
    server: asyncio.base_events.Server
    port: int


@dataclass
class StoreFaultProxy:
    """Relay store traffic of each node to ``upstream``, applying :class:`StoreRule` s.

    Attributes:
        events: what each rule did: ``{"t", "node", "op", "keys", "action"}`` dicts, ``t``
            on the monotonic clock.
    """

    upstream: tuple[str, int]
    rules: list[StoreRule] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _listeners: dict[int, _Listener] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, setup: Callable[[], None] | None = None) -> StoreFaultProxy:
        """Start the event loop thread; returns ``self``. ``setup`` runs on that thread
        first, before it opens any socket (the netns world moves it into node 0's
        namespace); what it raises is raised here (call :meth:`stop` then)."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="harness-store-faults", daemon=True
        )
        self._thread.start()
        if setup is not None:

            async def run() -> None:
                setup()

            self._call(run())
        return self

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float = 10.0) -> Any:
        assert self._loop is not None, "StoreFaultProxy.start() was not called"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def listen(self, node: int, host: str = "127.0.0.1") -> int:
        """Open (once) the listener that ``node``'s store traffic enters; returns its port."""
        if node in self._listeners:
            return self._listeners[node].port

        async def open_listener() -> _Listener:
            server = await asyncio.start_server(
                lambda r, w: self._spawn(self._relay(node, r, w)), host, 0
            )
            return _Listener(node, server, server.sockets[0].getsockname()[1])

        listener: _Listener = self._call(open_listener())
        self._listeners[node] = listener
        return listener.port

    def add_rule(self, rule: StoreRule) -> None:
        """Arm ``rule`` (it applies to requests seen from now on)."""
        with self._lock:
            self.rules.append(rule)

    def stop(self) -> None:
        """Close every listener and relayed connection and stop the thread. Idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = None

        async def shutdown() -> None:
            for listener in self._listeners.values():
                listener.server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(RuntimeError, TimeoutError):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()

    def __enter__(self) -> StoreFaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- relaying (event loop thread) ---------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _decide(self, node: int, req: _wire.Request) -> StoreRule | None:
        with self._lock:
            for rule in self.rules:
                if matches(rule, node, req):
                    rule.fired += 1
                    self.events.append(
                        {
                            "t": time.monotonic(),
                            "node": node,
                            "op": request_op(req),
                            "keys": request_keys(req),
                            "action": rule.action,
                        }
                    )
                    return rule
        return None

    async def _relay(
        self, node: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()  # like Toxiproxy: accept, then close when upstream is down
            return
        back = asyncio.get_running_loop().create_task(_pipe(server_r, client_w))
        try:
            await self._forward(node, client_r, server_w, client_w)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            server_w.close()
            back.cancel()
            await asyncio.gather(back, return_exceptions=True)
            client_w.close()

    async def _forward(
        self,
        node: int,
        client_r: asyncio.StreamReader,
        server_w: asyncio.StreamWriter,
        client_w: asyncio.StreamWriter,
    ) -> None:
        decoder = _decoder.RequestDecoder()
        while data := await client_r.read(65536):
            for req in decoder.feed(data):
                rule = self._decide(node, req)
                if rule is not None and rule.action == "fail":
                    client_w.transport.abort()
                    return
                if rule is not None and rule.action == "drop":
                    while await client_r.read(65536):
                        pass  # black hole: keep the client connected, forward nothing
                    return
                if rule is not None and rule.action == "delay":
                    await server_w.drain()
                    await asyncio.sleep(rule.delay)
                server_w.write(_wire.encode_request(req))
            await server_w.drain()
            if decoder.error is not None:
                return  # a non-store peer: end the relay like the store would


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
