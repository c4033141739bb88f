"""Parse the address of a Toxiproxy API server as users write it (standard library only)."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["parse_api_address"]


def parse_api_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``http://HOST:PORT`` -> ``(host, port)``.

    Raises:
        ValueError: not one of those forms, or the port is out of range; the message
            quotes ``text``.
    """
    url = text if "://" in text else f"http://{text}"
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise ValueError(f"{text!r} is not HOST:PORT ({exc})") from exc
    if parts.scheme != "http" or not host or port is None or parts.path not in ("", "/"):
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8474)")
    return host, port
