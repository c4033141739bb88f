"""JSON in and out of the control plane, as Toxiproxy's Go server reads and writes it."""

from __future__ import annotations

import json

from aiohttp import web

from harness.errors import InvalidRequestError

__all__ = ["decode_json", "json_response"]


def decode_json(raw: bytes) -> object:
    """Decode a request body as Go's decoder does (first value only; NaN/Infinity refused).

    Raises:
        InvalidRequestError: the body is empty or not JSON.
    """

    def reject(constant: str) -> object:
        raise ValueError(f"invalid JSON constant {constant}")

    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise InvalidRequestError("bad request body: EOF")
    try:
        value, _ = json.JSONDecoder(parse_constant=reject).raw_decode(text)
    except ValueError as exc:
        raise InvalidRequestError(f"bad request body: {exc}") from exc
    return value


def json_response(body: object, status: int = 200) -> web.Response:
    text = json.dumps(body, separators=(",", ":"))
    return web.Response(status=status, text=text, content_type="application/json")
