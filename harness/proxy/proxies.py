"""One proxy: its listener, upstream, toxic chains, enable/disable and live connections.

Everything here runs on one asyncio event loop (the HTTP control plane shares it), so no
locks are needed. Semantics follow Toxiproxy 2.x (see ``docs/proxy.md`` for the few
deliberate differences): a proxy listens on ``listen`` and dials ``upstream`` once per
accepted client; if that dial fails the client is closed. Disabling a proxy stops its
listener (new connects are refused) and drops its connections; unlike Toxiproxy, the port
stays reserved for the proxy (a bound socket that does not listen) until it is enabled
again or deleted, so nothing else on the machine can take it meanwhile.

Randomness: every link (one direction of one connection) draws from its own
``random.Random`` seeded with ``"<seed>/<proxy>/<connection number>/<stream>"``, so a given
seed reproduces every toxicity roll and jitter draw whatever other connections do.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from typing import Protocol

from harness.errors import (
    InvalidRequestError,
    NotFoundError,
    ProxyStartError,
)
from harness.proxy.netaddr import (
    bind_listen,
    hold_port,
    join_address,
    relisten,
    resolve_listen,
    split_address,
)
from harness.proxy.relay import Connection, Side
from harness.proxy.toxics import STREAMS, Toxic, new_toxic, toxic_json, updated_toxic

__all__ = ["DEFAULT_LISTEN", "Hub", "Proxy", "proxy_fields"]

DEFAULT_LISTEN = "127.0.0.1:0"


def proxy_fields(
    body: object, listen: str, upstream: str, enabled: bool
) -> tuple[str, str, str, bool]:
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise InvalidRequestError(
            f"bad request body: a proxy must be a JSON object, got {body!r:.80}"
        )
    values: dict[str, object] = {"name": "", "listen": listen, "upstream": upstream}
    for key, default in list(values.items()):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidRequestError(f"bad request body: field {key!r} must be a string")
        values[key] = default if value is None else value
    flag = body.get("enabled")
    if flag is not None and not isinstance(flag, bool):
        raise InvalidRequestError("bad request body: field 'enabled' must be a boolean")
    return (
        str(values["name"]),
        str(values["listen"]),
        str(values["upstream"]),
        enabled if flag is None else flag,
    )


class Hub(Protocol):
    """What a proxy needs of its collection: the seed and the event log."""

    seed: int

    def log(
        self, proxy: str, connection: int, stream: str, toxic: str, action: str, detail: str
    ) -> None: ...


class Proxy:
    """One proxy: a listener, an upstream address, two toxic chains, live connections."""

    def __init__(self, hub: Hub, name: str, listen: str, upstream: str) -> None:
        self.hub, self.name, self.upstream = hub, name, upstream
        self.listen = listen or DEFAULT_LISTEN
        self.enabled = False
        self.chain: dict[str, list[Toxic]] = {stream: [] for stream in STREAMS}
        self.connections: dict[int, Connection] = {}
        self.count = 0  # connections accepted so far (never reset: numbers stay unique)
        self.seed_base = 0  # count at the last reseed; link seeds number from here
        self._listener: socket.socket | None = None
        self._held: socket.socket | None = None  # the port, kept while disabled
        self._tasks: set[asyncio.Task[None]] = set()

    def to_json(self) -> dict[str, object]:
        """The proxy with its toxics, in Toxiproxy's shape (``Logger`` included)."""
        toxics = [toxic_json(t) for stream in STREAMS for t in self.chain[stream]]
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "Logger": {},
            "toxics": toxics,
        }

    def _log(self, action: str, detail: str = "", *, connection: int = 0, toxic: str = "") -> None:
        self.hub.log(self.name, connection, "", toxic, action, detail)

    def _log_toxic(self, action: str, toxic: Toxic) -> None:
        attributes = ", ".join(f"{k}={v}" for k, v in toxic.attributes.items())
        detail = f"{toxic.type} {toxic.stream}, toxicity {toxic.toxicity:g}, {attributes or '-'}"
        self._log(action, detail, toxic=toxic.name)

    async def start(self) -> None:
        """Start listening (no-op when already enabled).

        Raises:
            ProxyStartError: the listen address does not resolve or cannot be bound.
        """
        if self.enabled:
            return
        held, self._held = self._held, None
        if held is not None and join_address(*held.getsockname()[:2]) == self.listen:
            try:
                sock = relisten(held)
            except OSError:
                held.close()
                sock = await bind_listen(self.listen)
        else:
            if held is not None:
                held.close()
            sock = await bind_listen(self.listen)
        self._listener = sock
        asyncio.get_running_loop().add_reader(sock.fileno(), self._accept_ready, sock)
        self.listen = join_address(*sock.getsockname()[:2])
        self.enabled = True
        self._log("enabled", f"listening on {self.listen}")

    def stop(self, *, hold: bool = True) -> None:
        """Stop listening (the port stays reserved unless ``hold`` is false: see
        :func:`hold_port`) and drop every connection (no-op when already disabled)."""
        if not self.enabled:
            return
        self.enabled = False
        listener, self._listener = self._listener, None
        if listener is not None:
            asyncio.get_running_loop().remove_reader(listener.fileno())
            if hold:
                self._held = hold_port(listener)  # the same socket, no longer listening
            else:
                listener.close()
        for task in list(self._tasks):
            task.cancel()
        for conn in list(self.connections.values()):
            conn.close("proxy disabled", drop=True)
        self._log("disabled")

    def close(self) -> None:
        """Stop, and give the port back (the proxy is being deleted: the port is not held
        on the way, three system calls a link saved in a run's teardown)."""
        self.stop(hold=False)
        if self._held is not None:
            self._held.close()
            self._held = None

    def _accept_ready(self, listener: socket.socket) -> None:
        # Our own accept loop: asyncio.Server asserts (and leaks the socket) when it is
        # closed while an accepted connection is still being set up.
        loop = asyncio.get_running_loop()
        for _ in range(100):
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: back off as asyncio does
                self._log("accept failed", f"{exc}; retrying in 1 s")
                loop.remove_reader(listener.fileno())
                loop.call_later(1.0, self._resume_accepting, listener)
                return
            sock.setblocking(False)
            self.count += 1
            task = loop.create_task(self._serve(sock, self.count))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _resume_accepting(self, listener: socket.socket) -> None:
        if self._listener is listener:
            asyncio.get_running_loop().add_reader(listener.fileno(), self._accept_ready, listener)

    async def _serve(self, sock: socket.socket, number: int) -> None:
        """Set up one accepted client: dial the upstream, then wire the two together."""
        loop = asyncio.get_running_loop()
        client, upstream = Side(), Side()
        settled = False
        try:
            await loop.connect_accepted_socket(lambda: client, sock)
            assert client.transport is not None
            try:
                host, port = split_address(self.upstream, "dial tcp")
                await loop.create_connection(lambda: upstream, host, port)
            except (OSError, ProxyStartError) as exc:
                self._log("upstream failed", f"{self.upstream}: {exc}", connection=number)
                client.transport.close()  # accepted, then closed: as Toxiproxy does
                settled = True
                return
            assert upstream.transport is not None
            if client.early_loss or upstream.early_loss or not self.enabled:
                return
            peer = join_address(*client.transport.get_extra_info("peername")[:2])
            self._log("connected", f"client {peer}", connection=number)
            seed = f"{self.hub.seed}/{self.name}/{number - self.seed_base}"
            conn = Connection(
                number, client, upstream, self.chain, seed, self._log_link, self._closed
            )
            self.connections[number] = conn
            settled = True
            client.transport.resume_reading()
            upstream.transport.resume_reading()
        finally:
            if not settled:  # failed, cancelled (proxy disabled) or the client left early
                for side in (client, upstream):
                    if side.transport is not None:
                        side.transport.abort()
                if client.transport is None:
                    sock.close()

    def _log_link(self, number: int, stream: str, toxic: str, action: str, detail: str) -> None:
        self.hub.log(self.name, number, stream, toxic, action, detail)

    def _closed(self, conn: Connection) -> None:
        self.connections.pop(conn.number, None)

    def _live(self) -> list[Connection]:
        return [self.connections[n] for n in sorted(self.connections)]

    async def update(self, body: object) -> None:
        """Apply a partial proxy update (``listen``, ``upstream``, ``enabled``).

        Raises:
            InvalidRequestError: the body is malformed.
            ProxyStartError: the new listen address does not resolve or cannot be bound.
        """
        _, listen, upstream, enabled = proxy_fields(body, self.listen, self.upstream, self.enabled)
        family, address = await resolve_listen(listen)
        del family
        if join_address(*address) != self.listen or upstream != self.upstream:
            self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled and not self.enabled:
            await self.start()
        elif not enabled:
            self.stop()

    def find(self, name: str) -> Toxic:
        """The toxic of that name.

        Raises:
            NotFoundError: no toxic of that name on this proxy.
        """
        for stream in STREAMS:
            for toxic in self.chain[stream]:
                if toxic.name == name:
                    return toxic
        raise NotFoundError("toxic not found")

    def add_toxic(self, body: object) -> Toxic:
        """Validate and add a toxic; live connections start applying it at once.

        Raises:
            InvalidRequestError: bad body, stream, type or attributes.
            AlreadyExistsError: the name is taken on this proxy.
        """
        names = {t.name for stream in STREAMS for t in self.chain[stream]}
        toxic = new_toxic(body, existing_names=names)
        self.chain[toxic.direction].append(toxic)
        self._log_toxic("toxic added", toxic)
        for conn in self._live():
            conn.links[toxic.direction].add(toxic)
        return toxic

    def update_toxic(self, name: str, body: object) -> Toxic:
        """Change a toxic's attributes/toxicity; live links restart it (re-rolling toxicity).

        Raises:
            NotFoundError: no toxic of that name.
            InvalidRequestError: bad body.
        """
        old = self.find(name)
        new = updated_toxic(old, body)
        chain = self.chain[old.direction]
        chain[chain.index(old)] = new
        self._log_toxic("toxic updated", new)
        for conn in self._live():
            conn.links[new.direction].update(new)
        return new

    def remove_toxic(self, name: str) -> None:
        """Remove a toxic; held data moves on, and removing ``timeout`` closes connections.

        Raises:
            NotFoundError: no toxic of that name.
        """
        toxic = self.find(name)
        self.chain[toxic.direction].remove(toxic)
        self._log_toxic("toxic removed", toxic)
        for conn in self._live():
            conn.links[toxic.direction].remove(name)

    def remove_all_toxics(self) -> None:
        """Remove every toxic, upstream first, each chain from its front."""
        for stream in STREAMS:
            while self.chain[stream]:
                self.remove_toxic(self.chain[stream][0].name)
