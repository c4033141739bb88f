"""All proxies of one server: create, populate, delete, reset; the seed and the event log.

Runs on the proxy's event loop with :class:`~harness.proxy.proxies.Proxy` (no locks).
"""

from __future__ import annotations

import asyncio
import time

from harness.errors import (
    AlreadyExistsError,
    InvalidRequestError,
    NotFoundError,
    ProxyApiError,
    ProxyStartError,
)
from harness.proxy.events import EventLog
from harness.proxy.netaddr import join_address, resolve_listen
from harness.proxy.proxies import DEFAULT_LISTEN, Proxy, proxy_fields

__all__ = ["Proxy", "ProxyCollection"]


class ProxyCollection:
    """All proxies of one server, plus its seed and event log."""

    def __init__(self, seed: int, *, event_capacity: int = 100_000) -> None:
        self.proxies: dict[str, Proxy] = {}
        self.seed = seed
        self.events = EventLog(event_capacity)
        self._t0 = time.monotonic()

    def log(
        self, proxy: str, connection: int, stream: str, toxic: str, action: str, detail: str
    ) -> None:
        """Record one event (times are taken here)."""
        self.events.record(
            time=time.monotonic() - self._t0,
            wall=time.time(),
            proxy=proxy,
            connection=connection,
            stream=stream,
            toxic=toxic,
            action=action,
            detail=detail,
        )

    def get(self, name: str) -> Proxy:
        """The proxy of that name.

        Raises:
            NotFoundError: no such proxy.
        """
        try:
            return self.proxies[name]
        except KeyError:
            raise NotFoundError("proxy not found") from None

    async def create(self, body: object) -> Proxy:
        """Create (and by default start) a proxy from a Toxiproxy proxy body.

        Raises:
            InvalidRequestError: malformed body, missing ``name`` or ``upstream``.
            AlreadyExistsError: the name is taken.
            ProxyStartError: the listener could not start; the proxy is not created.
        """
        name, listen, upstream, enabled = proxy_fields(body, "", "", True)
        for key, value in (("name", name), ("upstream", upstream)):
            if not value:
                raise InvalidRequestError(f"missing required field: {key}")
        if name in self.proxies:
            raise AlreadyExistsError("proxy already exists")
        proxy = Proxy(self, name, listen, upstream)
        if enabled:
            await proxy.start()
        if name in self.proxies:  # created meanwhile by a concurrent request
            proxy.close()
            raise AlreadyExistsError("proxy already exists")
        self.proxies[name] = proxy
        return proxy

    async def populate(self, body: object) -> tuple[list[Proxy] | None, ProxyApiError | None]:
        """Create or replace proxies from a JSON array, as Toxiproxy's ``/populate`` does.

        Returns:
            The proxies handled before any failure (None when validation failed), and the
            error that stopped processing, if any.
        """
        if body is None:
            body = []  # Go decodes null into an empty list
        if not isinstance(body, list):
            kind = type(body).__name__
            return None, InvalidRequestError(f"bad request body: expected an array, got {kind}")
        entries = []
        for number, entry in enumerate(body, start=1):
            try:
                name, listen, upstream, enabled = proxy_fields(entry, "", "", True)
            except InvalidRequestError as exc:
                return None, exc
            for key, value in (("name", name), ("upstream", upstream)):
                if not value:
                    return None, InvalidRequestError(
                        f"missing required field: {key} at proxy {number}"
                    )
            entries.append((name, listen, upstream, enabled))
        done: list[Proxy] = []
        for name, listen, upstream, enabled in entries:
            existing = self.proxies.get(name)
            if existing is not None:
                try:
                    _, address = await resolve_listen(listen or DEFAULT_LISTEN)
                except ProxyStartError as exc:
                    return done, exc
                if join_address(*address) == existing.listen and upstream == existing.upstream:
                    done.append(existing)
                    continue
                existing.close()
            proxy = Proxy(self, name, listen, upstream)
            try:
                if enabled:
                    await proxy.start()
            except ProxyStartError as exc:
                return done, exc
            self.proxies[name] = proxy
            done.append(proxy)
        return done, None

    def delete(self, name: str) -> None:
        """Stop and forget a proxy.

        Raises:
            NotFoundError: no such proxy.
        """
        self.get(name).close()
        del self.proxies[name]

    async def reset(self) -> None:
        """Re-enable every proxy and remove all toxics (Toxiproxy's ``/reset``).

        Raises:
            ProxyStartError: a proxy could not be re-enabled; later proxies are untouched.
        """
        for proxy in list(self.proxies.values()):
            await proxy.start()
            proxy.remove_all_toxics()

    def reseed(self, seed: int) -> None:
        """Use a new seed from now on and restart connection numbering (extension)."""
        self.seed = seed
        for proxy in self.proxies.values():
            proxy.seed_base = proxy.count
        self.log("", 0, "", "", "reseeded", f"seed {seed}")

    async def close(self) -> None:
        """Stop every proxy (server shutdown)."""
        for proxy in self.proxies.values():
            proxy.close()
        await asyncio.sleep(0)
