"""The Toxiproxy-compatible HTTP control plane (aiohttp) and the embedded server.

Routes, status codes, JSON shapes and error bodies follow Toxiproxy 2.12 (see
``docs/proxy.md``). Extensions, under paths Toxiproxy does not use:

* ``GET /events?since=N&proxy=NAME``: the event log (which toxic acted on which
  connection and when) as ``{"events": [...], "last": seq, "dropped": n}``.
* ``GET /seed`` / ``POST /seed {"seed": N}``: the seed behind every random choice.
* ``POST /bulk/...``: one request acting on many proxies (:mod:`harness.proxy.bulk_api`).

:func:`serve` runs the control plane on the current loop (the CLI uses it);
:class:`ToxiproxyServer` runs it on its own thread for tests and the harness.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from aiohttp import web

from harness.errors import InvalidRequestError, ProxyApiError
from harness.proxy.api_json import decode_json, json_response
from harness.proxy.bulk_api import bulk_routes
from harness.proxy.collection import Proxy, ProxyCollection
from harness.proxy.events import Event
from harness.proxy.loop import new_event_loop
from harness.proxy.netaddr import bind_listen, join_address
from harness.proxy.toxics import toxic_json

__all__ = ["TOXIPROXY_VERSION", "ToxiproxyServer", "build_app", "decode_json", "serve"]

TOXIPROXY_VERSION = "2.12.0"
_HUB: web.AppKey[ProxyCollection] = web.AppKey("hub", ProxyCollection)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    body = json.dumps({"error": message, "status": status}, separators=(",", ":")) + "\n"
    headers = {"X-Content-Type-Options": "nosniff"}
    return web.Response(status=status, text=body, content_type="text/plain", headers=headers)


@web.middleware
async def _toxiproxy_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    request_id = secrets.token_hex(10)
    if request.headers.get("User-Agent", "").startswith("Mozilla/"):
        response: web.StreamResponse = web.Response(
            status=403, text="User agent not allowed\n", content_type="text/plain"
        )
    else:
        try:
            response = await handler(request)
        except ProxyApiError as exc:
            response = _error(exc.status, exc.detail)
        except web.HTTPNotFound:
            response = web.Response(
                status=404, text="404 page not found\n", content_type="text/plain"
            )
        except web.HTTPException as exc:
            response = web.Response(status=exc.status, text=exc.text or "")
        except Exception as exc:  # never let bad input take the server down
            logging.getLogger(__name__).exception("%s %s failed", request.method, request.path)
            response = _error(500, f"internal error: {type(exc).__name__}: {exc}")
    response.headers["X-Toxiproxy-Request-Id"] = request_id
    return response


async def _body(request: web.Request) -> object:
    return decode_json(await request.read())


def _hub(request: web.Request) -> ProxyCollection:
    return request.app[_HUB]


async def _proxies(request: web.Request) -> web.Response:
    hub = _hub(request)
    return json_response({name: hub.proxies[name].to_json() for name in sorted(hub.proxies)})


async def _create_proxy(request: web.Request) -> web.Response:
    proxy = await _hub(request).create(await _body(request))
    return json_response(proxy.to_json(), 201)


async def _populate(request: web.Request) -> web.Response:
    done: list[Proxy] | None
    error: ProxyApiError | None
    try:
        body = await _body(request)
    except InvalidRequestError as exc:
        done, error = None, exc
    else:
        done, error = await _hub(request).populate(body)
    proxies = None if done is None else [proxy.to_json() for proxy in done]
    if error is None:
        return json_response({"proxies": proxies}, 201)
    return json_response(
        {"error": error.detail, "status": error.status, "proxies": proxies}, error.status
    )


async def _get_proxy(request: web.Request) -> web.Response:
    return json_response(_hub(request).get(request.match_info["proxy"]).to_json())


async def _update_proxy(request: web.Request) -> web.Response:
    proxy = _hub(request).get(request.match_info["proxy"])
    await proxy.update(await _body(request))
    return json_response(proxy.to_json())


async def _delete_proxy(request: web.Request) -> web.Response:
    _hub(request).delete(request.match_info["proxy"])
    return web.Response(status=204)


async def _toxics(request: web.Request) -> web.Response:
    proxy = _hub(request).get(request.match_info["proxy"])
    return json_response(proxy.to_json()["toxics"])


async def _create_toxic(request: web.Request) -> web.Response:
    proxy = _hub(request).get(request.match_info["proxy"])
    return json_response(toxic_json(proxy.add_toxic(await _body(request))))


async def _get_toxic(request: web.Request) -> web.Response:
    proxy = _hub(request).get(request.match_info["proxy"])
    return json_response(toxic_json(proxy.find(request.match_info["toxic"])))


async def _update_toxic(request: web.Request) -> web.Response:
    proxy = _hub(request).get(request.match_info["proxy"])
    proxy.find(request.match_info["toxic"])
    toxic = proxy.update_toxic(request.match_info["toxic"], await _body(request))
    return json_response(toxic_json(toxic))


async def _delete_toxic(request: web.Request) -> web.Response:
    _hub(request).get(request.match_info["proxy"]).remove_toxic(request.match_info["toxic"])
    return web.Response(status=204)


async def _reset(request: web.Request) -> web.Response:
    await _hub(request).reset()
    return web.Response(status=204)


async def _version(request: web.Request) -> web.Response:
    body = f'{{"version": "{TOXIPROXY_VERSION}"}}\n'.encode()
    return web.Response(body=body, headers={"Content-Type": "application/json;charset=utf-8"})


def _int_query(request: web.Request, key: str) -> int:
    raw = request.query.get(key, "0")
    try:
        return int(raw)
    except ValueError as exc:
        raise InvalidRequestError(
            f"query parameter {key!r} must be an integer, got {raw!r}"
        ) from exc


async def _events(request: web.Request) -> web.Response:
    hub = _hub(request)
    events: list[Event] = hub.events.since(_int_query(request, "since"), request.query.get("proxy"))
    return json_response(
        {
            "events": [event.to_json() for event in events],
            "last": hub.events.last_seq,
            "dropped": hub.events.dropped,
        }
    )


async def _get_seed(request: web.Request) -> web.Response:
    return json_response({"seed": _hub(request).seed})


async def _set_seed(request: web.Request) -> web.Response:
    body = await _body(request)
    seed = body.get("seed") if isinstance(body, dict) else None
    if not isinstance(seed, int) or isinstance(seed, bool):
        expected = '{"seed": <integer>}'
        raise InvalidRequestError(f"bad request body: expected {expected}, got {body!r:.80}")
    _hub(request).reseed(seed)
    return json_response({"seed": seed})


def build_app(hub: ProxyCollection) -> web.Application:
    """The aiohttp application serving Toxiproxy's API (plus extensions) over ``hub``."""
    app = web.Application(middlewares=[_toxiproxy_middleware])
    app[_HUB] = hub
    proxy, toxic = "/proxies/{proxy}", "/proxies/{proxy}/toxics/{toxic}"
    app.router.add_routes(
        [
            web.get("/proxies", _proxies),
            web.post("/proxies", _create_proxy),
            web.post("/populate", _populate),
            web.get(proxy, _get_proxy),
            web.post(proxy, _update_proxy),
            web.patch(proxy, _update_proxy),
            web.delete(proxy, _delete_proxy),
            web.get(proxy + "/toxics", _toxics),
            web.post(proxy + "/toxics", _create_toxic),
            web.get(toxic, _get_toxic),
            web.post(toxic, _update_toxic),
            web.patch(toxic, _update_toxic),
            web.delete(toxic, _delete_toxic),
            web.post("/reset", _reset),
            web.get("/version", _version),
            web.get("/events", _events),
            web.get("/seed", _get_seed),
            web.post("/seed", _set_seed),
            *bulk_routes(_hub),
        ]
    )
    return app


async def serve(
    host: str, port: int, hub: ProxyCollection, ready: Callable[[str, int], None]
) -> web.AppRunner:
    """Start the control plane on the running loop; ``ready(host, port)`` gets the bound port.

    Returns:
        The runner; ``await runner.cleanup()`` stops serving.

    Raises:
        ProxyStartError: the API address cannot be bound.
    """
    sock = await bind_listen(join_address(host, port))
    runner = web.AppRunner(build_app(hub), access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    bound = sock.getsockname()
    ready(str(bound[0]), int(bound[1]))
    return runner


class ToxiproxyServer:
    """The embedded server on its own event-loop thread: ``with ToxiproxyServer() as s:``.

    Attributes:
        host, port: where the API listens once started (``port=0`` picks a free port).
        seed: the seed behind every random choice (drawn at random when not given).
        url: ``http://host:port``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, seed: int | None = None):
        self.host, self.port = host, port
        self.seed = secrets.randbits(32) if seed is None else seed
        self.hub = ProxyCollection(self.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The API's base URL."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> ToxiproxyServer:
        """Start serving; returns once the API port is bound.

        Raises:
            ProxyStartError: the API address cannot be bound.
            RuntimeError: already started.
        """
        if self._thread is not None:
            raise RuntimeError(f"the embedded toxiproxy at {self.url} is already started")
        loop = new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="toxiproxy", daemon=True)
        self._thread.start()

        def ready(host: str, port: int) -> None:
            self.host, self.port = host, port

        try:
            self._runner = self.call(serve(self.host, self.port, self.hub, ready))
        except BaseException:
            self.stop()
            raise
        return self

    def call(self, coro: Awaitable[Any]) -> Any:
        """Run a coroutine on the server's loop and return its result (for tests/harness).

        Raises:
            RuntimeError: the server is not running.
        """
        if self._loop is None:
            raise RuntimeError("the embedded toxiproxy is not running; call start() first")

        async def run() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def events(self, since: int = 0, proxy: str | None = None) -> list[Event]:
        """The event log, read in-process (same content as ``GET /events``)."""

        async def read() -> list[Event]:
            return self.hub.events.since(since, proxy)

        result: list[Event] = self.call(read())
        return result

    def stop(self) -> None:
        """Stop every proxy and the API, then the loop thread (idempotent)."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if loop.is_running():

            async def shutdown() -> None:
                await self.hub.close()
                if runner is not None:
                    await runner.cleanup()
                await asyncio.get_running_loop().shutdown_default_executor()

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=30)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> ToxiproxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
