"""One typed Toxiproxy client for the harness, whichever server is behind it.

It drives ``toxiproxy-python`` (the real client) where that client has the call, and plain
``requests`` for what it lacks (toxic update, proxy update, ``/populate``, the embedded
server's extensions). It papers over toxiproxy-python's quirks:

* host and port are process-global class attributes (``APIConsumer``): each call sets
  them under a lock, so several clients for different servers can coexist;
* no request timeout: every request gets ``timeout`` seconds;
* a 500 (e.g. port in use) surfaces as ``KeyError('name')``; errors carry raw bytes;
  ``Toxiproxy.destroy("name")`` silently does nothing; ``add_toxic`` returns None: here
  every failure is a :class:`harness.errors.ProxyApiError` subclass naming the server,
  the request, the status and the server's words, and every call returns typed values.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import quote, urlsplit

import requests
import toxiproxy
import toxiproxy.api
import toxiproxy.exceptions

from harness.errors import (
    AlreadyExistsError,
    NotFoundError,
    ToxiproxyProtocolError,
)
from harness.proxy.bulk_client import BulkOps
from harness.proxy.client_errors import refused, unreached
from harness.proxy.info import ProxyInfo, ToxicInfo

__all__ = ["ProxyInfo", "ToxicInfo", "ToxiproxyClient"]


class _TimedRequests:
    """Stands in for ``requests`` inside toxiproxy-python: adds a timeout, keeps the reply."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.last: requests.Response | None = None

    def _send(self, method: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout)
        self.last = requests.request(method, **kwargs)
        return self.last

    def get(self, **kwargs: Any) -> requests.Response:
        return self._send("GET", **kwargs)

    def post(self, **kwargs: Any) -> requests.Response:
        return self._send("POST", **kwargs)

    def delete(self, **kwargs: Any) -> requests.Response:
        return self._send("DELETE", **kwargs)


class ToxiproxyClient:
    """Typed access to a Toxiproxy API server (real or the harness's embedded one).

    Besides the errors each method lists, every call may raise
    ``ToxiproxyUnreachableError`` (nothing listens), ``ToxiproxyTimeoutError`` (no answer
    within ``timeout`` seconds) or ``ToxiproxyProtocolError`` (an answer that is not
    Toxiproxy's).
    """

    # toxiproxy-python keeps host/port in class attributes; this lock serialises our use.
    _consumer_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, host: str = "127.0.0.1", port: int = 8474, *, timeout: float = 10.0):
        self.host, self.port, self.timeout = host, port, timeout
        self._bulk: BulkOps | None = None

    @classmethod
    def from_url(cls, url: str, *, timeout: float = 10.0) -> ToxiproxyClient:
        """A client for ``http://host:port`` (e.g. the value of ``TOXIPROXY_URL``).

        Raises:
            ValueError: the URL is not ``http://host:port``.
        """
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise ValueError(f"toxiproxy URL must look like http://host:port, got {url!r}")
        return cls(parts.hostname, parts.port, timeout=timeout)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://{self.host}:{self.port}"

    # ------------------------------------------------------------------ plumbing
    @contextlib.contextmanager
    def _legacy(self, method: str, path: str) -> Iterator[toxiproxy.Toxiproxy]:
        """Run toxiproxy-python calls against this server, translating every failure."""
        shim = _TimedRequests(self.timeout)
        with self._consumer_lock:
            api = toxiproxy.api
            saved = api.requests, api.APIConsumer.host, api.APIConsumer.port
            api.requests, api.APIConsumer.host, api.APIConsumer.port = shim, self.host, self.port
            try:
                yield toxiproxy.Toxiproxy()
            except requests.JSONDecodeError as exc:
                raise self._translate(method, path, shim, exc) from exc
            except requests.RequestException as exc:
                raise unreached(self.url, self.timeout, method, path, exc) from exc
            except (toxiproxy.exceptions.ProxyExists, toxiproxy.exceptions.NotFound) as exc:
                raise self._translate(method, path, shim, exc) from exc
            except (toxiproxy.exceptions.InvalidToxic, KeyError, ValueError) as exc:
                raise self._translate(method, path, shim, exc) from exc
            finally:
                api.requests, api.APIConsumer.host, api.APIConsumer.port = saved

    def _translate(self, method: str, path: str, shim: _TimedRequests, exc: Exception) -> Exception:
        last = shim.last
        if last is not None and last.status_code >= 400:
            return refused(self.url, method, path, last)
        if isinstance(exc, toxiproxy.exceptions.ProxyExists):
            return AlreadyExistsError(
                f"toxiproxy at {self.url}: cannot {method} {path}: proxy already exists",
                detail="proxy already exists",
            )
        cause = f"{type(exc).__name__}: {exc}"
        return ToxiproxyProtocolError(
            f"toxiproxy at {self.url} answered {method} {path} unreadably for the client ({cause})"
        )

    def _raw(self, method: str, path: str, body: object = None, ok: int = 200) -> Any:
        """One plain ``requests`` call for what toxiproxy-python lacks; returns parsed JSON."""
        try:
            response = requests.request(method, self.url + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise unreached(self.url, self.timeout, method, path, exc) from exc
        if response.status_code >= 400:
            raise refused(self.url, method, path, response)
        if response.status_code != ok:
            got = response.status_code
            raise ToxiproxyProtocolError(
                f"toxiproxy at {self.url} answered {method} {path} with HTTP {got}, not {ok}"
            )
        try:
            return response.json() if response.content else None
        except requests.JSONDecodeError as exc:
            body = response.text[:200]
            raise ToxiproxyProtocolError(
                f"toxiproxy at {self.url} answered {method} {path} with non-JSON {body!r}"
            ) from exc

    @staticmethod
    def _handle(name: str) -> toxiproxy.Proxy:
        """A toxiproxy-python ``Proxy`` for ``name`` without fetching the list first."""
        return toxiproxy.Proxy(name=name, upstream="", enabled=True, listen="")

    @staticmethod
    def _path(*names: str) -> str:
        return "/proxies/" + "/toxics/".join(quote(n, safe="") for n in names)

    # ------------------------------------------------------------------ server
    def version(self) -> str:
        """The server's version string, e.g. ``"2.12.0"``.

        Raises:
            ToxiproxyUnreachableError, ToxiproxyTimeoutError, ToxiproxyProtocolError.
        """
        data = self._raw("GET", "/version")
        if not isinstance(data, dict) or not isinstance(data.get("version"), str):
            raise ToxiproxyProtocolError(f"toxiproxy at {self.url}: /version gave {data!r}")
        return str(data["version"])

    def reset(self) -> None:
        """Enable every proxy and remove every toxic (``POST /reset``).

        Raises:
            ProxyStartError: a proxy could not be re-enabled (e.g. its port is taken).
        """
        with self._legacy("POST", "/reset") as server:
            if not server.reset():
                raise ToxiproxyProtocolError(f"toxiproxy at {self.url}: /reset failed")

    def populate(self, proxies: Sequence[Mapping[str, object]]) -> list[ProxyInfo]:
        """Create or replace proxies in one request (``POST /populate``).

        Raises:
            InvalidRequestError, ProxyStartError: as the server reports them.
        """
        data = self._raw("POST", "/populate", list(map(dict, proxies)), ok=201)
        return [ProxyInfo.from_json(p) for p in data["proxies"]]

    def delete_proxies(self, names: Sequence[str]) -> list[str]:
        """Delete many proxies in one call (see :meth:`bulk`).

        Returns:
            One problem line per proxy that could not be deleted (empty when all were).
        """
        return self.bulk.delete(names)

    @property
    def bulk(self) -> BulkOps:
        """Calls acting on many proxies at once (one request on the embedded server)."""
        if self._bulk is None:
            self._bulk = BulkOps(self)
        return self._bulk

    # ------------------------------------------------------------------ proxies
    def proxies(self) -> dict[str, ProxyInfo]:
        """Every proxy by name (toxics included)."""
        data = self._raw("GET", "/proxies")
        return {name: ProxyInfo.from_json(p) for name, p in data.items()}

    def get_proxy(self, name: str) -> ProxyInfo:
        """One proxy. Raises: NotFoundError: no such proxy."""
        return ProxyInfo.from_json(self._raw("GET", self._path(name)))

    def create_proxy(
        self, name: str, upstream: str, listen: str = "127.0.0.1:0", *, enabled: bool = True
    ) -> ProxyInfo:
        """Create a proxy; ``listen`` port 0 picks a free port (see ``listen_address``).

        Raises:
            AlreadyExistsError: the name is taken.
            InvalidRequestError: empty name or upstream.
            ProxyStartError: the listen address cannot be bound (Toxiproxy's 500).
        """
        with self._legacy("POST", "/proxies") as server:
            created = server.create(upstream=upstream, name=name, listen=listen, enabled=enabled)
        return ProxyInfo(created.name, created.listen, created.upstream, created.enabled)

    def delete_proxy(self, name: str) -> None:
        """Delete a proxy, dropping its connections. Raises: NotFoundError."""
        with self._legacy("DELETE", self._path(name)):
            self._handle(name).destroy()

    def update_proxy(
        self,
        name: str,
        *,
        listen: str | None = None,
        upstream: str | None = None,
        enabled: bool | None = None,
    ) -> ProxyInfo:
        """Change a proxy's listen address, upstream or enabled flag (omitted: kept).

        Raises:
            NotFoundError, InvalidRequestError, ProxyStartError.
        """
        body = {"listen": listen, "upstream": upstream, "enabled": enabled}
        patch = {key: value for key, value in body.items() if value is not None}
        return ProxyInfo.from_json(self._raw("POST", self._path(name), patch))

    def disable(self, name: str) -> None:
        """Stop listening (connects refused) and drop active connections. Raises: NotFoundError."""
        with self._legacy("POST", self._path(name)):
            self._handle(name).disable()

    def enable(self, name: str) -> None:
        """Listen again. Raises: NotFoundError, ProxyStartError (port taken meanwhile)."""
        with self._legacy("POST", self._path(name)):
            self._handle(name).enable()

    @contextlib.contextmanager
    def down(self, name: str) -> Iterator[None]:
        """Disable the proxy inside the ``with`` block, enable it again after."""
        self.disable(name)
        try:
            yield
        finally:
            self.enable(name)

    # ------------------------------------------------------------------ toxics
    def toxics(self, proxy: str) -> list[ToxicInfo]:
        """The proxy's toxics, upstream first. Raises: NotFoundError."""
        return [ToxicInfo.from_json(t) for t in self._raw("GET", self._path(proxy) + "/toxics")]

    def get_toxic(self, proxy: str, name: str) -> ToxicInfo:
        """One toxic. Raises: NotFoundError (proxy or toxic)."""
        return ToxicInfo.from_json(self._raw("GET", self._path(proxy, name)))

    def add_toxic(
        self,
        proxy: str,
        type: str,
        *,
        stream: str = "downstream",
        name: str | None = None,
        toxicity: float = 1.0,
        attributes: Mapping[str, int] | None = None,
    ) -> ToxicInfo:
        """Add a toxic (default name ``<type>_<stream>``) and return it as stored.

        Raises:
            NotFoundError: no such proxy.
            InvalidRequestError: bad type, stream or attributes.
            AlreadyExistsError: the toxic name is taken on this proxy.
        """
        toxic_name = name or f"{type}_{stream}"
        with self._legacy("POST", self._path(proxy) + "/toxics"):
            self._handle(proxy).add_toxic(
                type=type,
                stream=stream,
                name=toxic_name,
                toxicity=toxicity,
                attributes=dict(attributes or {}),
            )
        return self.get_toxic(proxy, toxic_name)

    def update_toxic(
        self,
        proxy: str,
        name: str,
        *,
        attributes: Mapping[str, int] | None = None,
        toxicity: float | None = None,
    ) -> ToxicInfo:
        """Change a toxic in place (omitted attributes keep their values).

        Raises:
            NotFoundError, InvalidRequestError.
        """
        body: dict[str, object] = {"attributes": dict(attributes or {})}
        if toxicity is not None:
            body["toxicity"] = toxicity
        return ToxicInfo.from_json(self._raw("POST", self._path(proxy, name), body))

    def remove_toxic(self, proxy: str, name: str) -> None:
        """Remove a toxic (removing ``timeout`` closes its connections). Raises: NotFoundError."""
        with self._legacy("DELETE", self._path(proxy, name)):
            if not self._handle(proxy).destroy_toxic(name):
                raise ToxiproxyProtocolError(f"toxiproxy at {self.url}: toxic removal failed")

    # ------------------------------------------------------------------ extensions
    def _extension(self, method: str, path: str, body: object = None) -> Any:
        try:
            return self._raw(method, path, body)
        except NotFoundError as exc:
            hint = "only the harness's embedded proxy has the event log and seed extensions"
            raise ToxiproxyProtocolError(
                f"toxiproxy at {self.url} has no {path.partition('?')[0]} endpoint ({hint})"
            ) from exc

    def events(self, since: int = 0, proxy: str | None = None) -> list[dict[str, Any]]:
        """Event log entries after ``since`` (embedded server only).

        Raises:
            ToxiproxyProtocolError: the server does not offer the extension.
        """
        query = f"?since={since}" + (f"&proxy={quote(proxy, safe='')}" if proxy else "")
        events: list[dict[str, Any]] = self._extension("GET", "/events" + query)["events"]
        return events

    def seed(self) -> int:
        """The server's seed (embedded server only). Raises: ToxiproxyProtocolError."""
        return int(self._extension("GET", "/seed")["seed"])

    def set_seed(self, seed: int) -> None:
        """Reseed the server (embedded only). Raises: ToxiproxyProtocolError."""
        self._extension("POST", "/seed", {"seed": seed})
