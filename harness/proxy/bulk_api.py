"""The bulk extension of the control plane: one request acts on many proxies.

Toxiproxy's API acts on one proxy per request; a run of 4096 nodes has 4096 links, and a
fault on "all" of them would be 4096 requests (and their teardown as many again). These
routes, under a path Toxiproxy does not use, take a list of proxy names and one action:

* ``POST /bulk/toxics`` ``{"proxies": [...], "toxic": {...}}`` adds the toxic (the body
  of ``POST /proxies/{proxy}/toxics``) to every proxy;
* ``POST /bulk/toxics/remove`` ``{"proxies": [...], "name": "..."}`` removes it;
* ``POST /bulk/proxies`` ``{"proxies": [...], "enabled": bool}`` enables or disables them;
* ``POST /bulk/proxies/delete`` ``{"proxies": [...]}`` deletes them.

Every name is checked first (an unknown one fails the request with 404 before anything
changes); ``/bulk/toxics`` adds all or none (a toxic refused on one proxy is taken off the
ones it was already added to). The answer is ``{"proxies": [names acted on]}``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from harness.errors import InvalidRequestError, NotFoundError
from harness.proxy.api_json import decode_json, json_response
from harness.proxy.collection import Proxy, ProxyCollection

__all__ = ["bulk_routes"]


def _names(body: object) -> list[str]:
    names = body.get("proxies") if isinstance(body, dict) else None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        got = f"{body!r:.80}"
        raise InvalidRequestError(f'bad request body: expected {{"proxies": [names]}}, got {got}')
    return names


def _targets(hub: ProxyCollection, body: object) -> list[Proxy]:
    names = _names(body)
    missing = [name for name in names if name not in hub.proxies]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""
        )
        raise NotFoundError(f"proxy not found: {shown}")
    return [hub.proxies[name] for name in names]


def _field(body: object, key: str, kind: type, want: str) -> Any:
    """``body[key]`` when it is a ``kind``; else the request is refused naming ``want``."""
    value = body.get(key) if isinstance(body, dict) else None
    if not isinstance(value, kind):
        raise InvalidRequestError(f"bad request body: expected {want}, got {value!r}")
    return value


def _done(proxies: list[Proxy]) -> web.Response:
    return json_response({"proxies": [proxy.name for proxy in proxies]})


def bulk_routes(hub_of: Any) -> list[web.RouteDef]:
    """The routes; ``hub_of(request)`` is the :class:`ProxyCollection` a request acts on."""

    async def body_of(request: web.Request) -> object:
        return decode_json(await request.read())

    async def add_toxics(request: web.Request) -> web.Response:
        body = await body_of(request)
        proxies = _targets(hub_of(request), body)
        toxic = body.get("toxic") if isinstance(body, dict) else None
        added: list[tuple[Proxy, str]] = []
        try:
            for proxy in proxies:
                added.append((proxy, proxy.add_toxic(toxic).name))
        except BaseException:
            for proxy, name in added:  # all or none
                proxy.remove_toxic(name)
            raise
        return _done(proxies)

    async def remove_toxics(request: web.Request) -> web.Response:
        body = await body_of(request)
        proxies = _targets(hub_of(request), body)
        name = _field(body, "name", str, '"name": <toxic name>')
        for proxy in proxies:
            proxy.find(name)  # every proxy has it, or nothing is removed
        for proxy in proxies:
            proxy.remove_toxic(name)
        return _done(proxies)

    async def enable(request: web.Request) -> web.Response:
        body = await body_of(request)
        proxies = _targets(hub_of(request), body)
        enabled = _field(body, "enabled", bool, '"enabled": true|false')
        for proxy in proxies:
            await proxy.update({"enabled": enabled})
        return _done(proxies)

    async def delete(request: web.Request) -> web.Response:
        hub = hub_of(request)
        proxies = _targets(hub, await body_of(request))
        for proxy in proxies:
            hub.delete(proxy.name)
        return _done(proxies)

    return [
        web.post("/bulk/toxics", add_toxics),
        web.post("/bulk/toxics/remove", remove_toxics),
        web.post("/bulk/proxies", enable),
        web.post("/bulk/proxies/delete", delete),
    ]
