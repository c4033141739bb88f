"""What a Toxiproxy server reports about its proxies and toxics, as typed values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["ProxyInfo", "ToxicInfo"]


@dataclass(frozen=True)
class ToxicInfo:
    """A toxic as the server reports it."""

    name: str
    type: str
    stream: str
    toxicity: float
    attributes: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToxicInfo:
        """Build from the API's JSON; ``KeyError``/``TypeError`` on a foreign shape."""
        return cls(
            str(data["name"]),
            str(data["type"]),
            str(data["stream"]),
            float(data["toxicity"]),
            MappingProxyType(dict(data.get("attributes") or {})),
        )


@dataclass(frozen=True)
class ProxyInfo:
    """A proxy as the server reports it."""

    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[ToxicInfo, ...] = ()

    @property
    def listen_address(self) -> tuple[str, int]:
        """``listen`` as ``(host, port)``, ready for ``socket.create_connection``."""
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProxyInfo:
        """Build from the API's JSON; ``KeyError``/``TypeError`` on a foreign shape."""
        toxics = tuple(ToxicInfo.from_json(t) for t in data.get("toxics") or ())
        return cls(
            str(data["name"]),
            str(data["listen"]),
            str(data["upstream"]),
            bool(data["enabled"]),
            toxics,
        )
