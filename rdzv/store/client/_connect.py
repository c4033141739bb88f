"""Connecting a client: resolve, dial with bounded retries, handshake.

Everything blocking here takes an absolute ``time.monotonic()`` deadline (``None`` = none).
Connect and handshake retry on refused / reset / no answer / no route / unresolvable name /
a peer that closes during the handshake until the deadline. Each connection attempt waits
for an answer for a bounded time, and the pauses between attempts follow the schedule of
:mod:`rdzv.store.client._retry` (jitter drawn from the caller's ``random.Random``): a path that
heals is used within about a second, a store that is starting within a few ms, and a host
nobody reaches gets about one SYN a second from each node. The final error (a
``StoreConnectionError`` carrying ``connect_cause``) names the endpoint, the
attempt count, the elapsed time (measured from the start, never shown below the timeout once
it passed), the timeout and the last cause, in words or with a public exception name, and what
that cause means (:mod:`rdzv.store.client._causes`). Peers are never reverse-resolved.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time

from rdzv.errors import StoreClosedError, StoreConnectionError, StoreProtocolError
from rdzv.events import DEBUG, emit, get_logger
from rdzv.store.client._causes import MEANING, _NoAnswer, _Unresolvable, classify, connect_failure
from rdzv.store.client._retry import ATTEMPT_FIRST, Schedule
from rdzv.store.client._transport import Channel, Expired
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import format_elapsed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.store.client._retry import Draws

__all__ = [
    "Connected",
    "FirstAttempt",
    "LazyRandom",
    "connect",
    "describe",
    "endpoint_text",
    "first_attempt",
]

_log = get_logger("rdzv.client")

_HANDSHAKE: Final = _wire.encode_request(_wire.Validate())
_PROBE: Final = _wire.encode_request(_wire.Check((_wire.PROBE_KEY,)))
#: A connection attempt's handshake up to the PING's nonce (a u32, little-endian).
_TO_NONCE: Final = _HANDSHAKE + _wire.ping_frame(0)[:-4]
_RETRYABLE: Final = (OSError, StoreProtocolError)


_SYSTEM: Final = random.SystemRandom()


class LazyRandom:
    """The connect's jitter: a ``random.Random(seed)`` made at its first draw, or, without a
    seed, the operating system's randomness (``random.SystemRandom``: nothing to seed,
    which costs a fresh process tens of µs, and never the same on two nodes, even when a
    program seeded ``random`` alike everywhere). A connect draws once per attempt (the
    attempt's bound) and once per pause."""

    __slots__ = ("_random", "_seed")

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed
        self._random: random.Random | None = None

    def uniform(self, a: float, b: float, /) -> float:
        if self._seed is None:
            return _SYSTEM.uniform(a, b)
        if self._random is None:
            self._random = random.Random(self._seed)
        return self._random.uniform(a, b)


class _Silent(Expired):
    """The peer accepted a connection but never answered the handshake."""


class _CutShort(Expired):
    """The connect deadline passed early in a handshake: no evidence about the peer."""


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
        if isinstance(error[0], socket.gaierror):
            raise _Unresolvable(f"{host!r} did not resolve: {error[0]}") from error[0]
        raise error[0]
    if not result:
        raise _Unresolvable(f"resolving {host!r} did not finish before the deadline")
    return result[0]


def _dial(host: str, port: int, deadline: float | None, bound: float) -> socket.socket:
    """A socket connected to ``host:port``, each address tried for at most ``bound`` seconds
    (less when the deadline comes first)."""
    last: OSError | None = None
    for family, address in _resolve(host, port, deadline):
        sock = socket.socket(family, socket.SOCK_STREAM)
        began = time.monotonic()
        left = bound if deadline is None else deadline - began
        try:
            sock.settimeout(max(0.001, min(bound, left)))
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except TimeoutError:
            sock.close()
            waited = format_elapsed(time.monotonic() - began)
            last = _NoAnswer(f"no answer to the connection attempt within {waited} s")
            last.cut_short = left < bound
        except OSError as exc:
            sock.close()
            last = exc
    raise last or OSError(f"{host!r} resolved to no address")


class FirstAttempt:
    """A connect's first attempt, made (:func:`first_attempt`) before the connect itself:
    what came of it (the connection, or why it failed), and when it began."""

    __slots__ = ("began", "outcome")

    def __init__(self, outcome: Connected | BaseException | None, began: float) -> None:
        self.outcome = outcome
        self.began = began


def first_attempt(
    host: str, port: int, timeout: float | None, limits: _wire.Limits
) -> FirstAttempt:
    """A connect's first attempt (:func:`_attempt`), made before the connect itself: its
    outcome is the one :func:`connect` would have had from it. The attempt's bound is drawn
    from the system's randomness, as an unseeded :class:`LazyRandom` draws it, in fewer
    steps."""
    began = time.monotonic()
    deadline = None if timeout is None else began + timeout
    # Schedule.attempt_bound's first bound: uniform in [0.75, 1) of ATTEMPT_FIRST
    bound = (0.75 + int.from_bytes(os.urandom(2), "little") / (4 << 16)) * ATTEMPT_FIRST
    made = _attempt(host, port, timeout, deadline, bound, limits)
    if isinstance(made, BaseException):
        return FirstAttempt(made, began)
    channel, pipelined = made
    return FirstAttempt(Connected(channel, pipelined, 1, time.monotonic() - began), began)


def _attempt(
    host: str,
    port: int,
    timeout: float | None,
    deadline: float | None,
    bound: float,
    limits: _wire.Limits,
) -> tuple[Channel, bool] | BaseException:
    """One connection attempt (``bound``: how long the host may take to answer) and its
    handshake, written straight (in a fresh process the general handshake's layers cost
    about as much as the exchange itself): the connection and whether its store serves
    requests behind a WAIT, or why the attempt failed (an exception a retry may follow;
    returned, not raised). From anything out of the ordinary in the handshake's reply on,
    the general handshake (:func:`_handshake`) reads it. A connection's socket is left in
    timeout mode, for :mod:`~rdzv.store.client._express` to use as it is (the channel's
    polls set it blocking when they are first needed)."""
    try:
        sock = _dial(host, port, deadline, bound)
    except _RETRYABLE as exc:
        return exc
    echo = (os.getpid() & 0xFFFFFFFF).to_bytes(4, "little")  # the PING's nonce, echoed
    started = time.monotonic()
    reply: bytes | OSError
    sending = True
    try:
        sock.settimeout(max(0.001, _handshake_end(timeout, deadline, started) - started))
        sock.sendall(_TO_NONCE + echo + _PROBE)  # VALIDATE, PING and the probe: one write
        sending = False
        reply = sock.recv(64)
    except OSError as exc:
        reply = exc
    channel = Channel(sock, endpoint_text(host, port), limits)
    if type(reply) is bytes and len(reply) == 5 and reply[:4] == echo:
        return channel, reply[4] == _wire.READY
    try:
        sock.setblocking(True)  # the general channel's mode
        if isinstance(reply, bytes):
            channel.feed(reply)
        elif not isinstance(reply, TimeoutError):  # (a timeout: the general read says so)
            when = "while sending handshake" if sending else "during handshake"
            raise channel.lost_in(reply, when) from reply
        return channel, _handshake(channel, timeout, deadline, started)
    except (OSError, StoreProtocolError, Expired) as exc:
        channel.close()
        return exc


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
    rng: Draws,
    limits: _wire.Limits,
    first: FirstAttempt | None = None,
) -> Connected:
    """Connect to a TCPStore server and handshake, retrying until ``timeout`` seconds
    (from the start of ``first``: a first attempt made before, which failed: it is counted,
    and the retries go on from its cause).

    Raises:
        StoreConnectionError: no store answered in time (or something that is not a store
            did); the message names the endpoint, timeout, elapsed time, attempts and the
            last cause.
    """
    start, outcome = (time.monotonic(), None) if first is None else (first.began, first.outcome)
    assert not isinstance(outcome, Connected), "a first attempt that connected needs no connect"
    endpoint = endpoint_text(host, port)
    deadline = None if timeout is None else start + timeout
    schedule = Schedule(rng)
    attempts = 0
    last: BaseException | None = None
    foreign: StoreProtocolError | _Silent | None = None  # a peer that is not a store
    while True:
        attempts += 1
        if outcome is not None:  # the first attempt, made before
            failure, outcome = outcome, None
        else:
            made = _attempt(host, port, timeout, deadline, schedule.attempt_bound(), limits)
            if isinstance(made, BaseException):
                failure = made
            else:
                channel, pipelined = made
                elapsed = time.monotonic() - start
                if _log.isEnabledFor(DEBUG):
                    emit(_log, "connected", endpoint=endpoint, attempts=attempts, elapsed=elapsed)
                return Connected(channel, pipelined, attempts, elapsed)
        cut_short = isinstance(failure, _CutShort) or (
            isinstance(failure, _NoAnswer) and failure.cut_short
        )
        if not (cut_short and last is not None):
            last = failure  # an attempt cut short by the deadline says less
        if isinstance(failure, StoreProtocolError | _Silent):
            foreign = failure
        if _log.isEnabledFor(DEBUG):  # describing the cause costs on every attempt
            emit(_log, "connect_attempt", endpoint=endpoint, attempt=attempts, error=describe(last))
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        pause = schedule.pause(last, now - start)
        if deadline is not None and now + pause >= deadline:
            # An attempt starting at the deadline could only fail and would hide the
            # cause seen so far: wait out the budget and report.
            time.sleep(max(0.0, deadline - now))
            break
        time.sleep(pause)
    raise _give_up(endpoint, timeout, time.monotonic() - start, attempts, last, foreign)


def _handshake_budget(timeout: float | None) -> float:
    """Seconds one handshake may take: a silent acceptor must not eat the whole budget."""
    return 10.0 if timeout is None else max(1.0, timeout / 4)


def _handshake_end(timeout: float | None, deadline: float | None, started: float) -> float:
    """When a handshake begun at ``started`` gives up."""
    end = started + _handshake_budget(timeout)
    return end if deadline is None else min(end, deadline)


def _handshake(
    channel: Channel, timeout: float | None, deadline: float | None, started: float
) -> bool:
    """The rest of a handshake sent at ``started`` (:func:`_attempt` wrote it and read what
    it could): whether the store serves requests behind a WAIT."""
    nonce = os.getpid() & 0xFFFFFFFF
    hs_deadline = _handshake_end(timeout, deadline, started)
    try:
        echoed = channel.read(_wire.read_u32, hs_deadline, "handshake")
    except Expired:
        waited = time.monotonic() - started
        if waited < min(_handshake_budget(timeout), 0.5):  # cut short by the overall deadline
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
    cause = classify(last)
    meaning = None if cause is None else MEANING.get(cause)
    if isinstance(last, StoreClosedError):  # its message already says what it means
        meaning = None
    error = connect_failure(
        f"{head}: gave up after {tries} in {format_elapsed(shown)} s "
        f"(timeout {_seconds(timeout)}); last cause: {describe(last)}"
        + (f" ({meaning})" if meaning else ""),
        "not a store" if foreign is not None else cause,
    )
    # The cause a user can act on: an OSError or a protocol error, never this package's
    # private signals (the message has already said what they meant).
    error.__cause__ = _public(last)
    return error


def _public(last: BaseException | None) -> BaseException | None:
    """``last`` as a cause users may see: the builtin it stands for in place of this
    package's private signals; none for a deadline."""
    if isinstance(last, Expired):
        return None
    if isinstance(last, _NoAnswer):
        return TimeoutError(str(last))
    if isinstance(last, _Unresolvable):
        return last.__cause__ or OSError(str(last))  # the resolver's own error
    return last
