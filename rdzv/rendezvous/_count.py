"""How a member counts itself into its round (:mod:`rdzv.rendezvous._join`): ``add`` on
``count``, its confirmation and its place in ``joined``, in one write where the store allows
it; on a store that serves requests sent behind a WAIT (an rdzv server), also the CHECK of
``arbiter`` and the verdict's WAIT+GET, so that a member learns its place, whether the host
arbitrates, and then the verdict, in one round trip.

Each store call is bounded and its failure raised as :class:`RoundIO` does (invariants 7 and
9 of :mod:`rdzv.rendezvous._join`).
"""

from __future__ import annotations

from rdzv.errors import StoreError, StoreTimeoutError
from rdzv.rendezvous._round_io import RoundIO

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rdzv.store.client import HeldGet

__all__ = ["count_and_wait", "count_in", "read_held"]


def count_in(io: RoundIO, count: str, confirmed: str, due: bytes, append: tuple[str, str]) -> int:
    """add(count) with set(confirmed) and append(joined), in one write where the store
    allows it (every confirmation is in when count is full); the sum."""
    store = io.store
    add_then_set = getattr(store, "add_then_set", None)
    if callable(add_then_set):
        return int(io.call(add_then_set, count, 1, confirmed, due, append, name="add"))
    joined = int(io.call(store.add, count, 1))
    io.call(store.set, confirmed, due)
    io.call(store.append, *append, name="append")
    return joined


def count_and_wait(
    io: RoundIO, hosts: bool, count: str, confirmed: str, due: bytes, append: tuple[str, str]
) -> tuple[int, bool, HeldGet] | None:
    """As a member that does not arbitrate (``hosts`` False), on a store that serves a
    request sent behind a WAIT: :func:`count_in`'s writes, the CHECK of ``arbiter`` and the
    verdict's WAIT+GET in one write (``add_then_get``); the sum, whether ``arbiter`` is set,
    and the held read of the verdict (the caller ends it). None, nothing sent, elsewhere."""
    add_then_get = getattr(io.store, "add_then_get", None)
    if hosts or not callable(add_then_get):
        return None
    arbiter, done = io.keys.of(io.round, "arbiter"), io.keys.of(io.round, "done")
    args = (count, 1, confirmed, due, append, arbiter, done)
    counted: tuple[int, bool, HeldGet] | None = io.call(add_then_get, *args, name="add")
    return counted


def read_held(io: RoundIO, held: HeldGet, seconds: float | None) -> bytes | None:
    """The verdict read through ``held`` within ``seconds`` (a timeout is raised, for the
    caller's deadline to handle); with None, at once: the wait is cancelled (None returned:
    no verdict came first, and the connection is free for other requests).

    Raises:
        StoreTimeoutError: no verdict within ``seconds``.
        RendezvousError: the store failed (see :meth:`RoundIO.raise_store`).
    """
    try:
        return held.cancel() if seconds is None else held.get(seconds)
    except StoreTimeoutError as exc:
        if seconds is not None:
            raise
        io.raise_store(exc, "cancelling the wait for the verdict")
    except StoreError as exc:
        io.raise_store(exc, "waiting for the other nodes")
