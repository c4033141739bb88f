"""Client-side I/O: resolve, connect with bounded retries, handshake, framed reads.

Everything blocking here takes an absolute ``time.monotonic()`` deadline (``None`` = none).
Connect and handshake retry on refused / reset / unresolvable name / a peer that closes
during the handshake, with exponential backoff and full jitter drawn from the caller's
``random.Random``, until the deadline; the final error names the endpoint, the timeout, the
elapsed time, the attempt count and the last cause. Peers are never reverse-resolved.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

from rdzv import _wire
from rdzv._kv import PROBE_KEY
from rdzv.errors import StoreClosedError, StoreConnectionError, StoreProtocolError
from rdzv.events import emit

__all__ = ["Backoff", "Channel", "Expired", "connect"]

_log = logging.getLogger("rdzv.client")
T = TypeVar("T")

_HANDSHAKE: Final = _wire.encode_request(_wire.Validate())
_RETRYABLE: Final = (OSError, StoreProtocolError)


class Expired(Exception):
    """A read passed its deadline (the caller turns this into a named timeout)."""


class _Silent(Expired):
    """The peer accepted a connection but never answered the handshake."""


@dataclass
class Backoff:
    """Exponential backoff with full jitter: sleep ``uniform(0, min(cap, initial * 2**n))``."""

    rng: random.Random
    initial: float = 0.025
    cap: float = 1.0
    attempt: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap, self.initial * 2**self.attempt)
        self.attempt += 1
        return self.rng.uniform(ceiling / 4, ceiling)


def endpoint_text(host: str, port: int) -> str:
    """``host:port``, bracketing IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _resolve(host: str, port: int, deadline: float | None) -> list[tuple[int, tuple[object, ...]]]:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
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
        try:
            sock.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError(f"{host!r} resolved to no address")


@dataclass
class Connected:
    """A connected, validated socket and what the handshake learned."""

    channel: Channel
    pipelined: bool
    attempts: int
    elapsed: float


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
                last = exc
                if isinstance(exc, StoreProtocolError | _Silent):
                    foreign = exc
            else:
                elapsed = time.monotonic() - start
                emit(_log, "connected", endpoint=endpoint, attempts=attempts, elapsed=elapsed)
                return Connected(channel, pipelined, attempts, elapsed)
        emit(_log, "connect_attempt", endpoint=endpoint, attempt=attempts, error=_describe(last))
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        pause = backoff.next_delay()
        if deadline is not None and now + pause >= deadline:
            # An attempt starting at the deadline could only fail and would hide the
            # cause seen so far: wait out the budget and report.
            time.sleep(max(0.0, deadline - now))
            break
        time.sleep(pause)
    raise _give_up(endpoint, timeout, time.monotonic() - start, attempts, last, foreign)


def _handshake(channel: Channel, timeout: float | None, deadline: float | None) -> bool:
    nonce = os.getpid() & 0xFFFFFFFF
    probe = _wire.encode_request(_wire.Check((PROBE_KEY,)))
    channel.send(_HANDSHAKE + _wire.encode_request(_wire.Ping(nonce)) + probe, "handshake")
    # A silent acceptor must not eat the whole budget: bound one handshake attempt.
    budget = 10.0 if timeout is None else max(1.0, timeout / 4)
    started = time.monotonic()
    hs_deadline = started + budget
    if deadline is not None:
        hs_deadline = min(hs_deadline, deadline)
    try:
        echoed = channel.read(_wire.read_u32, hs_deadline, "handshake")
    except Expired:
        waited = time.monotonic() - started
        if waited < min(budget, 0.5):  # cut short by the overall deadline: no evidence
            raise Expired(f"the deadline passed {waited:.2f}s into the handshake") from None
        raise _Silent(
            f"the peer accepted the connection but did not answer the handshake within "
            f"{waited:.1f}s"
        ) from None
    if echoed != nonce:
        raise StoreProtocolError(
            f"not a rendezvous store: the PING reply was {channel.peek_sent_back(echoed)!r} "
            f"instead of the nonce {nonce}"
        )
    return channel.read(_wire.read_u8, hs_deadline, "handshake") == _wire.READY


def _describe(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    return f"{type(exc).__name__}: {exc}"


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}s"


def _give_up(
    endpoint: str,
    timeout: float | None,
    elapsed: float,
    attempts: int,
    last: BaseException | None,
    foreign: StoreProtocolError | _Silent | None,
) -> StoreConnectionError:
    cause = _describe(last)
    if isinstance(foreign, _Silent):
        head = (
            f"something at {endpoint} accepts connections but never answers the handshake: "
            "it is not a rendezvous store, or a stalled one"
        )
    elif foreign is not None:
        head = f"something answered at {endpoint} but it is {foreign}"
    else:
        head = f"no rendezvous store answered at {endpoint}"
    error = StoreConnectionError(
        f"{head}: gave up after {elapsed:.2f}s (timeout {_seconds(timeout)}) and {attempts} "
        f"connection attempt(s); last cause: {cause}"
    )
    error.__cause__ = last
    return error


class Channel:
    """One connection: ``sendall`` and deadline-bounded reads of framed replies."""

    def __init__(self, sock: socket.socket, endpoint: str, limits: _wire.Limits) -> None:
        self.sock = sock
        self.endpoint = endpoint
        self.limits = limits
        self._buf = bytearray()
        self._pos = 0
        self.closed = False

    def send(self, data: bytes, op: str) -> None:
        """Send ``data`` whole.

        Raises:
            StoreConnectionError: the connection is gone.
        """
        if self.closed:
            raise StoreClosedError(
                f"this client's connection to the store at {self.endpoint} was closed after "
                f"an earlier error; {op} was not sent (create a new client)"
            )
        try:
            self.sock.settimeout(None)
            self.sock.sendall(data)
        except OSError as exc:
            raise StoreClosedError(
                f"lost the connection to the store at {self.endpoint} while sending {op}: "
                f"{exc} (did the store host shut down or crash?)"
            ) from exc

    def read(
        self,
        parse: Callable[[bytearray, int], tuple[T, int]],
        deadline: float | None,
        op: str,
    ) -> T:
        """Read one reply with ``parse``, receiving until it is complete.

        Raises:
            Expired: the deadline passed first (nothing was consumed).
            StoreClosedError: the server closed the connection.
            StoreConnectionError: the connection failed.
            StoreProtocolError: the reply exceeds the limits.
        """
        while True:
            try:
                value, pos = parse(self._buf, self._pos)
            except _wire.Incomplete:
                pass
            except StoreProtocolError:
                # The reply stream can no longer be trusted: never read leftovers later.
                self.close()
                raise
            else:
                self._pos = pos
                if pos == len(self._buf):
                    self._buf.clear()
                    self._pos = 0
                return value
            self._recv(deadline, op)

    def _recv(self, deadline: float | None, op: str) -> None:
        if deadline is None:
            self.sock.settimeout(None)
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Expired
            self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(262144)
        except TimeoutError:
            raise Expired from None
        except OSError as exc:
            raise StoreClosedError(
                f"lost the connection to the store at {self.endpoint} during {op}: {exc} "
                "(did the store host shut down or crash?)"
            ) from exc
        if not chunk:
            raise StoreClosedError(
                f"the store at {self.endpoint} closed the connection during {op} "
                "(the store host shut down or crashed)"
            )
        self._buf += chunk

    def peek_sent_back(self, first: int) -> bytes:
        """What the peer sent: the 4 bytes read as ``first`` plus whatever else is buffered."""
        return (_wire.encode_u32(first) + bytes(self._buf[self._pos :]))[:64]

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.closed = True
        self.sock.close()
