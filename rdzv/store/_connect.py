"""Connecting a client: resolve, dial with bounded retries, handshake.

Everything blocking here takes an absolute ``time.monotonic()`` deadline (``None`` = none).
Connect and handshake retry on refused / reset / unresolvable name / a peer that closes
during the handshake until the deadline, pausing with jitter drawn from the caller's
``random.Random``: after a refused connection within :data:`FAST_WINDOW` seconds of the
start, :data:`FAST_RETRY` (the host is up and answers at once, its store is merely still
starting: a node 0 late by a few ms must not cost its peers a long back-off), otherwise an
exponential backoff (:class:`Backoff`); the final error names the endpoint, the attempt
count, the elapsed time (measured from the start, never shown below the timeout once it
passed), the timeout and the last cause, in words or with a public exception name. Peers
are never reverse-resolved.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import threading
import time

from rdzv.errors import StoreConnectionError, StoreProtocolError
from rdzv.events import DEBUG, emit, get_logger
from rdzv.store import _wire
from rdzv.store._convert import format_elapsed
from rdzv.store._transport import Channel, Expired

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "FAST_RETRY",
    "FAST_WINDOW",
    "Backoff",
    "Connected",
    "connect",
    "describe",
    "endpoint_text",
    "retry_pause",
]

_log = get_logger("rdzv.client")

#: Seconds from the start of a connect during which a refused attempt is retried after
#: :data:`FAST_RETRY` (with jitter: between half of it and all of it).
FAST_WINDOW: Final = 1.0
FAST_RETRY: Final = 0.02
_HANDSHAKE: Final = _wire.encode_request(_wire.Validate())
_PROBE: Final = _wire.encode_request(_wire.Check((_wire.PROBE_KEY,)))
_RETRYABLE: Final = (OSError, StoreProtocolError)


class _Silent(Expired):
    """The peer accepted a connection but never answered the handshake."""


class _NoAnswer(TimeoutError):
    """A connection attempt got nothing back: no SYN-ACK, no reset, no ICMP error."""


class _CutShort(Expired):
    """The connect deadline passed early in a handshake: no evidence about the peer."""


class Backoff:
    """Exponential backoff with full jitter: sleep ``uniform(0, min(cap, initial * 2**n))``."""

    __slots__ = ("attempt", "cap", "initial", "rng")

    def __init__(
        self, rng: random.Random, initial: float = 0.025, cap: float = 1.0, attempt: int = 0
    ) -> None:
        self.rng = rng
        self.initial = initial
        self.cap = cap
        self.attempt = attempt

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.initial * 2**self.attempt)
        self.attempt += 1
        return self.rng.uniform(ceiling / 4, ceiling)


def retry_pause(last: BaseException | None, since_start: float, backoff: Backoff) -> float:
    """Seconds to wait before the next attempt, given why the last one failed and how long
    ago the connect started: :data:`FAST_RETRY` (jittered) after a refusal within
    :data:`FAST_WINDOW`, else the backoff's next delay."""
    if isinstance(last, ConnectionRefusedError) and since_start < FAST_WINDOW:
        return backoff.rng.uniform(FAST_RETRY / 2, FAST_RETRY)
    return backoff.next_delay()


def endpoint_text(host: str, port: int) -> str:
    """``host:port``, bracketing IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _resolve(host: str, port: int, deadline: float | None) -> list[tuple[int, tuple[object, ...]]]:
    for family in (socket.AF_INET, socket.AF_INET6):  # an IP literal needs no lookup
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [(family, (host, port))]
    result: list[list[tuple[int, tuple[object, ...]]]] = []
    error: list[BaseException] = []

    def lookup() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            result.append([(info[0], info[4]) for info in infos])
        except BaseException as exc:  # handed back to the caller's thread
            error.append(exc)

    worker = threading.Thread(target=lookup, name=f"rdzv-resolve:{host}", daemon=True)
    worker.start()
    worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    if error:
        raise error[0]
    if not result:
        raise TimeoutError(f"resolving {host!r} did not finish before the deadline")
    return result[0]


def _dial(host: str, port: int, deadline: float | None) -> socket.socket:
    last: OSError | None = None
    for family, address in _resolve(host, port, deadline):
        sock = socket.socket(family, socket.SOCK_STREAM)
        began = time.monotonic()
        try:
            sock.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except TimeoutError:
            sock.close()
            waited = format_elapsed(time.monotonic() - began)
            last = _NoAnswer(f"no answer to the connection attempt within {waited} s")
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError(f"{host!r} resolved to no address")


class Connected:
    """A connected, validated socket and what the handshake learned."""

    __slots__ = ("attempts", "channel", "elapsed", "pipelined")

    def __init__(self, channel: Channel, pipelined: bool, attempts: int, elapsed: float) -> None:
        self.channel = channel
        self.pipelined = pipelined
        self.attempts = attempts
        self.elapsed = elapsed


def connect(
    host: str,
    port: int,
    timeout: float | None,
    rng: random.Random,
    limits: _wire.Limits,
) -> Connected:
    """Connect to a TCPStore server and handshake, retrying until ``timeout`` seconds.

    Raises:
        StoreConnectionError: no store answered in time (or something that is not a store
            did); the message names the endpoint, timeout, elapsed time, attempts and the
            last cause.
    """
    endpoint = endpoint_text(host, port)
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    backoff = Backoff(rng)
    attempts = 0
    last: BaseException | None = None
    foreign: StoreProtocolError | _Silent | None = None  # a peer that is not a store
    while True:
        attempts += 1
        try:
            sock = _dial(host, port, deadline)
        except _RETRYABLE as exc:
            last = exc
        else:
            channel = Channel(sock, endpoint, limits)
            try:
                pipelined = _handshake(channel, timeout, deadline)
            except (OSError, StoreProtocolError, Expired) as exc:
                channel.close()
                if not (isinstance(exc, _CutShort) and last is not None):
                    last = exc  # an attempt cut short says less than the one before it
                if isinstance(exc, StoreProtocolError | _Silent):
                    foreign = exc
            else:
                elapsed = time.monotonic() - start
                emit(_log, "connected", endpoint=endpoint, attempts=attempts, elapsed=elapsed)
                return Connected(channel, pipelined, attempts, elapsed)
        if _log.isEnabledFor(DEBUG):  # describing the cause costs on every attempt
            emit(_log, "connect_attempt", endpoint=endpoint, attempt=attempts, error=describe(last))
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        pause = retry_pause(last, now - start, backoff)
        if deadline is not None and now + pause >= deadline:
            # An attempt starting at the deadline could only fail and would hide the
            # cause seen so far: wait out the budget and report.
            time.sleep(max(0.0, deadline - now))
            break
        time.sleep(pause)
    raise _give_up(endpoint, timeout, time.monotonic() - start, attempts, last, foreign)


def _handshake(channel: Channel, timeout: float | None, deadline: float | None) -> bool:
    nonce = os.getpid() & 0xFFFFFFFF
    # A silent acceptor must not eat the whole budget: bound one handshake attempt.
    budget = 10.0 if timeout is None else max(1.0, timeout / 4)
    started = time.monotonic()
    hs_deadline = started + budget
    if deadline is not None:
        hs_deadline = min(hs_deadline, deadline)
    payload = _HANDSHAKE + _wire.encode_request(_wire.Ping(nonce)) + _PROBE
    try:
        channel.send(payload, "handshake", hs_deadline)
        echoed = channel.read(_wire.read_u32, hs_deadline, "handshake")
    except Expired:
        waited = time.monotonic() - started
        if waited < min(budget, 0.5):  # cut short by the overall deadline: no evidence
            raise _CutShort(
                f"the connect deadline passed {format_elapsed(waited)} s into the handshake"
            ) from None
        raise _Silent(
            "the peer accepted the connection but did not answer the handshake within "
            f"{format_elapsed(waited, 1)} s"
        ) from None
    if echoed != nonce:
        raise StoreProtocolError(
            f"not a rendezvous store: the PING reply was {channel.peek_sent_back(echoed)!r} "
            f"instead of the nonce {nonce}"
        )
    return channel.read(_wire.read_u8, hs_deadline, "handshake") == _wire.READY


def describe(exc: BaseException | None) -> str | None:
    """A cause for a message: ``PublicName: text``, or only the text for this module's own
    private signals (their class names mean nothing to a user)."""
    if exc is None:
        return None
    if isinstance(exc, Expired):
        return str(exc) or "the deadline passed"
    name = type(exc).__name__
    if name.startswith("_"):
        return str(exc) or "an unnamed error"
    return f"{name}: {exc}"


_UNREACHABLE: Final = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH})


def _meaning(last: BaseException | None) -> str:
    """What the last failed attempt says about the network, for the final error: refused,
    reset, no answer at all, or no route (empty when there is nothing to add)."""
    if isinstance(last, _NoAnswer):
        return (
            "no answer to the connection attempt: nothing came back, not even a refusal; "
            "a firewall silently drops it (a filtered port?) or the host is down"
        )
    if isinstance(last, ConnectionRefusedError):
        return (
            "refused: the host answered but nothing listens on that port (the store has not "
            "started, or listens on another address), or a firewall rejects the connection"
        )
    if isinstance(last, ConnectionResetError):
        return "reset: the host, or something on the path (a proxy, a firewall), reset it"
    if isinstance(last, OSError) and last.errno in _UNREACHABLE:
        return (
            "no route to the host: this node cannot reach that address (an address on "
            "another network, or a firewall answering host-unreachable)"
        )
    return ""


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:g} s"


def _give_up(
    endpoint: str,
    timeout: float | None,
    elapsed: float,
    attempts: int,
    last: BaseException | None,
    foreign: StoreProtocolError | _Silent | None,
) -> StoreConnectionError:
    if isinstance(foreign, _Silent):
        head = (
            f"something at {endpoint} accepts connections but never answers the handshake: "
            "it is not a rendezvous store, or a stalled one"
        )
    elif foreign is not None:
        head = f"something answered at {endpoint} but it is {foreign}"
    else:
        head = f"no rendezvous store answered at {endpoint}"
    shown = elapsed if timeout is None else max(elapsed, timeout)  # the deadline passed
    tries = "1 connection attempt" if attempts == 1 else f"{attempts} connection attempts"
    meaning = _meaning(last)
    error = StoreConnectionError(
        f"{head}: gave up after {tries} in {format_elapsed(shown)} s "
        f"(timeout {_seconds(timeout)}); last cause: {describe(last)}"
        + (f" ({meaning})" if meaning else "")
    )
    # The cause a user can act on: an OSError or a protocol error, never this package's
    # private deadline signals (the message has already said what they meant).
    error.__cause__ = None if isinstance(last, Expired) else last
    return error
