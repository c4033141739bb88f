"""How a world describes itself to the one registry that admits scenarios.

Each world package exports one :class:`WorldKind` (``harness.world.<name>.kind``): its name,
what it can do, why it cannot run on this machine (if it cannot), the session a whole suite
shares (Ray, connected once), whether its runs need a Toxiproxy API, and how to make its
:class:`~harness.world.base.WorldFactory`. :mod:`harness.run.worlds` reads these and nothing
else of a world to decide where a scenario runs, or why it is skipped.

Imports: the standard library, :mod:`harness.proxy.client` (the type of the proxy a world
may be handed) and the protocol (:mod:`harness.world.base`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from harness.world.base import WorldFactory

if TYPE_CHECKING:
    from harness.proxy.client import ToxiproxyClient

__all__ = ["Closeable", "WorldKind", "available"]


class Closeable(Protocol):
    """What a world's session is: something to close at the end of the suite."""

    def close(self) -> None:
        """End the session (what it started is stopped)."""


def available() -> str | None:
    """A world that runs wherever the harness does: never a reason it cannot."""
    return None


@dataclass(frozen=True)
class WorldKind:
    """One world, as the registry sees it.

    Attributes:
        name: the name of the worlds it makes (``local``, ``packed``, ``netns``, ``ray``).
        world: what a scenario's ``world`` says to get it (the packed world: ``local``
            with ``pack``).
        capabilities: what its worlds can do (names of :data:`~harness.world.base.CAPABILITIES`).
        make: its factory, for ``pack`` nodes per process or actor (None: the world's
            default) and the run's proxy client (None when :attr:`proxied` is false).
        proxied: its links are on a Toxiproxy API the run is handed (the embedded proxy
            or a real one); a world without (netns: its own proxy when links are needed;
            ray: an agent per host) is handed none, and none is started for it.
        unavailable: why this machine cannot run it (None: it can), asked before anything
            starts.
        session: opens what a whole suite of its scenarios shares, from the cluster
            address the user gave (None: the world's default), closed at the end; None:
            the world needs no session.
        packs: whether it can run nodes packed; a string: why not (the scenario is then
            skipped with it).
    """

    name: str
    world: str
    capabilities: frozenset[str]
    make: Callable[[int | None, ToxiproxyClient | None], WorldFactory]
    proxied: bool = False
    unavailable: Callable[[], str | None] = available
    session: Callable[[str | None], Closeable] | None = None
    packs: bool | str = True
