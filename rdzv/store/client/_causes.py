"""What a failed connect says about the network: the one classification of its causes (pure).

A connection attempt ends in one of a few ways, each pointing somewhere else:

* ``refused``: the host answered with a reset to the SYN: nothing listens on that port (or
  a firewall rejects it with a reset);
* ``no answer``: nothing came back at all, not even a refusal: a firewall that drops the
  port, a partition, or a host that is down (:class:`_NoAnswer`);
* ``no route``: this node has no route to the address, or something answered
  host/network-unreachable (``EHOSTUNREACH``, ``ENETUNREACH``);
* ``reset``: an established connection was reset during the handshake: something on the
  path (a proxy, a firewall) or another service on that port;
* ``unresolvable``: the host name did not resolve (:class:`_Unresolvable`);
* ``not a store``: something accepted the connection but did not answer the handshake as a
  store does (set by the connect itself, which saw the handshake).

:func:`classify` names the cause of an exception; the store's connect error says what the
cause means (:data:`MEANING`) and carries the name (``StoreConnectionError.connect_cause``), so
that the rendezvous can advise on it without classifying anything a second time.
"""

from __future__ import annotations

import errno

from rdzv.errors import StoreClosedError, StoreConnectionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Literal

    Cause = Literal["refused", "no answer", "no route", "reset", "unresolvable", "not a store"]

__all__ = ["MEANING", "classify", "connect_failure"]


class _NoAnswer(TimeoutError):
    """A connection attempt got nothing back: no SYN-ACK, no reset, no ICMP error.

    ``cut_short``: the connect deadline, not the attempt's own bound, ended the wait.
    """

    cut_short = False


class _Unresolvable(OSError):
    """The endpoint's host name did not resolve (or not before the deadline)."""


_UNREACHABLE: Final = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH})


def classify(exc: BaseException | None) -> Cause | None:
    """The cause ``exc`` stands for, or None when it is none of the network's answers (a
    peer that is not a store, a deadline, an unexpected error)."""
    if isinstance(exc, _NoAnswer):
        return "no answer"
    if isinstance(exc, _Unresolvable):
        return "unresolvable"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, ConnectionResetError) or (
        isinstance(exc, StoreClosedError) and exc.seen == "reset"
    ):
        return "reset"
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE:
        return "no route"
    return None


#: What each cause says about the network, for the store's connect error.
MEANING: Final[dict[Cause, str]] = {
    "no answer": (
        "no answer to the connection attempt: nothing came back, not even a refusal; "
        "a firewall silently drops it (a filtered port?) or the host is down"
    ),
    "refused": (
        "refused: the host answered but nothing listens on that port (the store has not "
        "started, or listens on another address), or a firewall rejects the connection"
    ),
    "reset": "reset: the host, or something on the path (a proxy, a firewall), reset it",
    "no route": (
        "no route to the host: this node cannot reach that address (an address on "
        "another network, or a firewall answering host-unreachable)"
    ),
    "unresolvable": "the host name does not resolve here (DNS)",
}


def connect_failure(message: str, cause: Cause | None) -> StoreConnectionError:
    """The error of a connect that reached no store, carrying ``cause`` (as
    ``connect_cause``) for whoever advises on it."""
    error = StoreConnectionError(message)
    error.connect_cause = cause
    return error
