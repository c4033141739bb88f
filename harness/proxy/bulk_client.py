"""Many proxies in one call: the client side of :mod:`harness.proxy.bulk_api`.

The embedded server acts on a whole list of proxies per request (one request to put a
toxic on 4096 links instead of 4096). A real Toxiproxy has no such endpoint: it answers
``404 page not found``, and from then on this client does the same work one proxy per
request, ``parallel`` requests at a time. Either way the caller sees one call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from harness.errors import HarnessError, NotFoundError

__all__ = ["BulkOps"]

#: What a server without the route answers (Go's default mux; the embedded one copies it).
_NO_ROUTE = "404 page not found"


class _Client(Protocol):
    """What bulk calls use of :class:`~harness.proxy.client.ToxiproxyClient`."""

    def _raw(self, method: str, path: str, body: object = None, ok: int = 200) -> Any: ...

    def add_toxic(
        self,
        proxy: str,
        type: str,
        *,
        stream: str = ...,
        name: str | None = ...,
        toxicity: float = ...,
        attributes: Mapping[str, int] | None = ...,
    ) -> Any: ...

    def remove_toxic(self, proxy: str, name: str) -> None: ...

    def enable(self, name: str) -> None: ...

    def disable(self, name: str) -> None: ...

    def delete_proxy(self, name: str) -> None: ...


class BulkOps:
    """Bulk calls on the proxies of ``client``'s server (``client.bulk``)."""

    def __init__(self, client: _Client, *, parallel: int = 8) -> None:
        self.client = client
        self.parallel = parallel
        #: None until known; False once the server answered that it has no bulk routes.
        self.native: bool | None = None

    def _bulk(self, path: str, body: Mapping[str, Any], one: Callable[[str], None]) -> None:
        names: list[str] = list(body["proxies"])
        if not names:
            return
        if self.native is not False:
            try:
                self.client._raw("POST", path, dict(body))
            except NotFoundError as exc:
                if exc.detail != _NO_ROUTE:
                    raise
                self.native = False
            else:
                self.native = True
                return
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="toxiproxy-bulk") as pool:
            list(pool.map(one, names))

    def add_toxic(
        self,
        proxies: Sequence[str],
        type: str,
        *,
        name: str,
        stream: str = "downstream",
        toxicity: float = 1.0,
        attributes: Mapping[str, int] | None = None,
    ) -> None:
        """Add one toxic to every proxy (the embedded server adds it to all or none).

        Raises:
            NotFoundError: a proxy does not exist.
            InvalidRequestError, AlreadyExistsError: as for one proxy.
        """
        toxic = {
            "type": type,
            "name": name,
            "stream": stream,
            "toxicity": toxicity,
            "attributes": dict(attributes or {}),
        }

        def one(proxy: str) -> None:
            self.client.add_toxic(
                proxy, type, name=name, stream=stream, toxicity=toxicity, attributes=attributes
            )

        self._bulk("/bulk/toxics", {"proxies": list(proxies), "toxic": toxic}, one)

    def remove_toxic(self, proxies: Sequence[str], name: str) -> None:
        """Remove the toxic ``name`` from every proxy. Raises: NotFoundError."""
        body = {"proxies": list(proxies), "name": name}
        self._bulk("/bulk/toxics/remove", body, lambda p: self.client.remove_toxic(p, name))

    def set_enabled(self, proxies: Sequence[str], enabled: bool) -> None:
        """Enable (or disable: open connections cut, new ones refused) every proxy.

        Raises:
            NotFoundError; ProxyStartError: a proxy could not listen again.
        """

        def one(proxy: str) -> None:
            (self.client.enable if enabled else self.client.disable)(proxy)

        self._bulk("/bulk/proxies", {"proxies": list(proxies), "enabled": enabled}, one)

    def delete(self, proxies: Sequence[str]) -> list[str]:
        """Delete every proxy; one already gone counts as deleted (a bulk request that
        timed out here may have deleted some before the one-by-one retry).

        Returns:
            One problem line per proxy that could not be deleted (empty when none is left).
        """
        problems: list[str] = []

        def one(proxy: str) -> None:
            try:
                self.client.delete_proxy(proxy)
            except NotFoundError:
                return  # already gone: a bulk delete that timed out here may have done it
            except HarnessError as exc:
                problems.append(f"could not delete proxy {proxy}: {exc}")

        try:
            self._bulk("/bulk/proxies/delete", {"proxies": list(proxies)}, one)
        except HarnessError:  # a name already gone, or a timeout: one by one, idempotent
            problems.clear()
            with ThreadPoolExecutor(self.parallel, thread_name_prefix="toxiproxy-bulk") as pool:
                list(pool.map(one, proxies))
        return problems
