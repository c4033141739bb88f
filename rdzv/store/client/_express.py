"""A client's opening exchanges, made straight on the socket: the express.

In a fresh process every function runs cold: under load each one a call meets for the
first time costs a few µs, and a member's first join meets dozens in the general client's
layers (the connect's retry loop, :class:`~._requests.Requests`, the
:class:`~._transport.Channel`'s polls and probes, :class:`~._waits.Wait`), more than its
requests cost on the socket. :func:`express` makes one connection attempt and runs a
*script* on it: a generator (the caller's, :mod:`rdzv.rendezvous._express`) that yields the
requests it wants, as :class:`~._client.TCPStore` calls, and receives their replies. Each is
made in a few lines on the socket, left in the timeout mode of the connection attempt (its
``sendall`` and ``recv`` wait in C): the same requests a TCPStore sends, in the same
writes, bounded by the same deadlines. At the first thing out of the ordinary the
connection becomes a :class:`~._client.TCPStore`, which finishes the request under way as it
finishes its own (the same errors, messages and bounds), and serves the script's later
requests; a failure is thrown into the script where it yielded:

* the attempt fails: the general connect retries from its cause (the attempt is counted,
  the connect timeout counts from its start) and the script runs on the connection it
  makes (a node 0 that starts late costs its members retries, not the express);
* the connection is to a store that cannot serve a request sent behind a WAIT (torch's):
  the script does not run (``Ended.ran`` False), the general client takes the connection;
* a reply is not whole by its deadline, or the peer closed: the general read reads what
  arrived and raises what it raises (a timeout closes the connection, an EOF is named); a
  reset or another error of the socket is named as the general read names it;
* the value of a WAIT+GET (``get_held``) has not come by its deadline, or its wait did not
  end with STOP_WAITING: the general client's :class:`~._requests.HeldGet` goes on.

The script's requests (the first item of each yielded tuple names the TCPStore method,
the last is the store timeout it runs with, as ``set_timeout`` would set it):

* ``("compare_sets", items, timeout)``: the values;
* ``("add_then_get", (key, amount, set_key, value, append, check_key, get_key), timeout)``:
  ``[sum, checked]``; the WAIT+GET stays outstanding;
* ``("get_held", (), timeout)``: the outstanding WAIT+GET's value (``HeldGet.get``);
* ``("set", (key, value), timeout)``: None (sent after the probe of ``_transport``'s
  invariant 2).

A deliberate difference: writes that have replies go without the probe (the read of their
replies finds a close); a connection the store closed just before such a write is reported
"during COMPARE_SET" where the general client says "before COMPARE_SET was sent".
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Generator

from rdzv.errors import StoreError, StoreProtocolError
from rdzv.events import DEBUG, emit, get_logger
from rdzv.store.client._client import TCPStore
from rdzv.store.client._connect import Connected, LazyRandom, connect, first_attempt
from rdzv.store.client._extensions import (
    add_and_check,
    add_then_get_frames,
    set_then_append_frames,
)
from rdzv.store.client._replies import bytes_reader
from rdzv.store.client._requests import HeldGet
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import to_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

    #: What a script yields: the TCPStore method, its arguments, the timeout it runs with.
    Step = tuple[str, Any, float]

__all__ = ["Ended", "express"]

_log: Final = get_logger("rdzv.client")
_LIMITS: Final = _wire.Limits()
_CAP: Final = _LIMITS.max_reply
_PREFIX: Final = b"/"
_RECV: Final = 65536
#: Each request's name in messages, as the general client's.
_OPS: Final = {
    "compare_sets": "COMPARE_SET",
    "add_then_get": "ADD",
    "get_held": "GET",
    "set": "SET",
}


class Ended:
    """How an :func:`express` ended.

    Attributes:
        store: the connection, as a TCPStore from now on (its operations bounded by the
            ``timeout`` :func:`express` was given).
        ran: whether the script ran (the first attempt reached an rdzv server).
        value: what the script returned (None when it did not run).
        held: the outstanding WAIT+GET of an ``add_then_get``, when the script returned
            before it read it (the caller ends it: ``get``, ``cancel`` or ``release``).
    """

    __slots__ = ("held", "ran", "store", "value")

    def __init__(self, store: TCPStore, ran: bool, value: Any, held: HeldGet | None) -> None:
        self.store = store
        self.ran = ran
        self.value = value
        self.held = held


def express(
    host: str,
    port: int,
    world_size: int | None,
    timeout: float,
    connect_timeout: float,
    script: Generator[Step, Any, Any],
) -> Ended:
    """Connect to the store at ``host:port`` (a client; ``timeout``: its operations'
    bound, ``connect_timeout``: the connect's) and run ``script`` on the connection (see
    the module doc).

    Raises:
        StoreConnectionError: no store answered in time, as ``TCPStore(...)`` raises it
            (the script did not run; it is closed).
    """
    args = (host, port, world_size, timeout)
    attempt = first_attempt(host, port, connect_timeout, _LIMITS)
    connected = attempt.outcome
    if isinstance(connected, Connected):
        if _log.isEnabledFor(DEBUG):  # as the general connect reports it
            endpoint, elapsed = connected.channel.endpoint, connected.elapsed
            emit(_log, "connected", endpoint=endpoint, attempts=1, elapsed=elapsed)
    else:  # the general connect's retries, from this attempt's cause (it is counted)
        try:
            connected = connect(host, port, connect_timeout, LazyRandom(), _LIMITS, attempt)
        except BaseException:
            script.close()
            raise
    if not connected.pipelined:
        script.close()
        return Ended(TCPStore.over(connected, *args, _LIMITS), False, None, None)
    try:
        return _run(script, connected, args)
    except BaseException:  # (a signal, or the script's own error): nothing is left open
        script.close()
        connected.channel.close()
        raise


def _run(
    script: Generator[Step, Any, Any],
    connected: Connected,
    args: tuple[str, int, int | None, float],
) -> Ended:
    """``script`` run on ``connected``, an rdzv server's connection (see :func:`express`)."""
    channel = connected.channel
    buf = b""  # received, not yet read
    store: TCPStore | None = None  # the general client, once it took over
    outstanding: str | None = None  # the key of a WAIT+GET sent, nothing read of it
    held: HeldGet | None = None  # the general client's read of it
    reply: Any = None
    error: StoreError | None = None
    while True:
        try:
            op, call_args, seconds = script.send(reply) if error is None else script.throw(error)
        except StopIteration as stop:
            value = stop.value
            break
        reply, error = None, None
        deadline = time.monotonic() + seconds
        if store is None:
            trouble, reply, buf, failure = _straight(channel.sock, buf, op, call_args, seconds)
            if op == "add_then_get" and trouble not in ("probe", "sending"):
                outstanding = call_args[6]  # its WAIT+GET went out
            elif op == "get_held" and trouble is None:
                outstanding = None
            if trouble is None:
                continue
            store = _take_over(connected, buf, args)
            try:
                reply, held = _finish(
                    store, op, call_args, seconds, deadline, trouble, failure, outstanding
                )
            except StoreError as exc:
                error = exc
            outstanding = None
            continue
        try:
            reply, held = _general(store, op, call_args, seconds, held)
        except StoreError as exc:
            error = exc
    if store is None:
        store = _take_over(connected, buf, args)
        if outstanding is not None:
            held = _hold(store, outstanding)
    else:  # its calls ran with the script's timeouts: back to the store's own
        store.set_timeout(args[3])
    return Ended(store, True, value, held)


def _straight(
    sock: socket.socket, buf: bytes, op: str, call_args: Any, seconds: float
) -> tuple[str | None, Any, bytes, OSError | None]:
    """``op`` made straight on ``sock`` (``buf``: received, not read): ``(trouble, reply,
    buf, failure)``; ``trouble`` None: done, ``reply`` is its reply; else what the general
    client finishes: ``"unsent"`` (the probe found an EOF), ``"probe"``, ``"sending"`` or
    ``"receiving"`` (``failure`` raised there, a timeout while sending included), or
    ``"sent"`` (the replies are not whole by the deadline, the peer closed, or they are not
    the ordinary ones)."""
    if op == "set":
        return _set(sock, buf, _frames(op, call_args), seconds)
    deadline = time.monotonic() + seconds
    try:
        if op != "get_held":
            sock.settimeout(max(seconds, 0.001))
            sock.sendall(_frames(op, call_args))
    except OSError as exc:
        return "sending", None, buf, exc
    armed = op != "get_held"  # the socket's timeout is the send's: the deadline's
    try:
        while True:
            try:
                if buf:  # (nothing to read before the first receive)
                    value, end = _replies(op, call_args, buf, 0)
                    return None, value, buf[end:], None
            except _wire.Incomplete:
                pass
            except StoreProtocolError:  # (a WAIT that did not end with STOP_WAITING too)
                return "sent", None, buf, None
            left = deadline - time.monotonic()
            if left <= 0:
                return "sent", None, buf, None
            if not armed:
                sock.settimeout(left)
            armed = False
            chunk = sock.recv(_RECV)
            if not chunk:
                return "sent", None, buf, None  # an EOF: the general read names it
            buf += chunk
    except TimeoutError:
        return "sent", None, buf, None
    except OSError as exc:
        return "receiving", None, buf, exc


def _set(
    sock: socket.socket, buf: bytes, frame: bytes, seconds: float
) -> tuple[str | None, None, bytes, OSError | None]:
    """A request without a reply (``frame``) made straight on ``sock``, as :func:`_straight`
    makes ``set``: after the probe of ``_transport``'s invariant 2, which peeks only when a
    poll saw something arrive (when nothing did, nothing is raised: as far as anyone can
    tell the store is there), sent at once; a send the socket does not take whole at once
    finishes within ``seconds``."""
    poller = select.poll()  # (select.select refuses descriptors above 1023: packed nodes)
    poller.register(sock, select.POLLIN)
    try:
        sock.settimeout(0.0)
        if poller.poll(0) and not sock.recv(1, socket.MSG_PEEK):
            return "unsent", None, buf, None  # an EOF arrived: the general set says so
    except BlockingIOError:
        pass  # (what the poll saw is gone)
    except OSError as exc:
        return "probe", None, buf, exc
    try:
        try:
            sent = sock.send(frame)
        except BlockingIOError:
            sent = 0
        if sent < len(frame):  # the store is not reading: wait as long as the send may
            sock.settimeout(max(seconds, 0.001))
            sock.sendall(frame[sent:])
    except OSError as exc:
        return "sending", None, buf, exc
    return None, None, buf, None


def _replies(op: str, call_args: Any, buf: bytes | bytearray, pos: int) -> tuple[Any, int]:
    """The replies of the TCPStore call ``op`` from ``pos`` in ``buf``, as the script takes
    them, and their end; raises :class:`~rdzv.store.wire._wire.Incomplete`, or a protocol
    error (a string over the client's limit; a held read whose WAIT did not end with
    STOP_WAITING: a store shutting down, which the general read names)."""
    if op == "compare_sets":
        return _wire.read_bytes_list(buf, pos, len(call_args), _CAP)
    if op == "add_then_get":
        (added, checked), end = add_and_check(buf, pos)
        return [added, checked == _wire.READY], end
    if buf[pos] != _wire.STOP_WAITING:
        raise StoreProtocolError("the WAIT did not end with STOP_WAITING")
    return _wire.read_bytes(buf, pos + 1, _CAP)


def _frames(op: str, call_args: Any) -> bytes:
    """The requests of the TCPStore call ``op``, as it writes them."""
    if op == "compare_sets":
        frame, data = _wire.compare_set_frame, b""
        for k, e, d in call_args:
            data += frame(_key(k), to_bytes(e), to_bytes(d))
        return data
    if op == "set":
        key, value = call_args
        return _wire.key_value_frame(_wire.Op.SET, _key(key), to_bytes(value))
    key, amount, set_key, value, (append_key, tail), check_key, get_key = call_args
    append = (_key(append_key), to_bytes(tail))
    then = set_then_append_frames(_key(set_key), to_bytes(value), append)
    return add_then_get_frames(_key(key), amount, then, _key(check_key), _key(get_key))


def _key(key: str) -> bytes:
    return _PREFIX + (key.encode() if type(key) is str else to_bytes(key, "key"))


def _take_over(
    connected: Connected, buf: bytes, args: tuple[str, int, int | None, float]
) -> TCPStore:
    """The connection as a TCPStore, with what was received and not read."""
    if buf:
        connected.channel.feed(buf)
    return TCPStore.over(connected, *args, _LIMITS)


def _finish(
    store: TCPStore,
    op: str,
    call_args: Any,
    seconds: float,
    deadline: float,
    trouble: str,
    failure: OSError | None,
    outstanding: str | None,
) -> tuple[Any, HeldGet | None]:
    """The general client's end of ``op``, which the straight one left at ``trouble`` (see
    :func:`_straight`): its reply, and the general read of an ``add_then_get``'s WAIT+GET
    (``outstanding``: sent, nothing read of it).

    Raises:
        StoreError: what the general client raises for it.
    """
    channel, name = store._channel, _OPS[op]
    if trouble == "unsent":
        return _general(store, op, call_args, seconds, None)
    if failure is not None:
        if trouble == "probe":
            raise channel.lost_in(failure, f"before {name} was sent, so {name} was not sent")
        if trouble == "sending" and isinstance(failure, TimeoutError):
            channel.close(f"sending {name} did not finish before the deadline")
            raise channel.send_timeout(name, seconds) from None
        when = "while sending" if trouble == "sending" else "during"
        raise channel.lost_in(failure, f"{when} {name}") from failure
    if op == "get_held":
        assert outstanding is not None
        held = _hold(store, outstanding)
        return held.get(seconds, deadline), None
    reply = store._requests.finish(
        lambda b, p: _replies(op, call_args, b, p), name, deadline, seconds
    )
    return reply, None if outstanding is None else _hold(store, outstanding)


def _hold(store: TCPStore, key: str) -> HeldGet:
    """The general client's read of the WAIT+GET of ``key`` sent on ``store``'s connection."""
    return store._requests.hold(_key(key), key, bytes_reader(_LIMITS))


def _general(
    store: TCPStore, op: str, call_args: Any, seconds: float, held: HeldGet | None
) -> tuple[Any, HeldGet | None]:
    """``op`` by the general client, which took the connection over: its reply and the
    WAIT+GET's read still outstanding.

    Raises:
        StoreError: what the general client raises for it.
    """
    if op == "get_held":
        assert held is not None
        return held.get(seconds), None
    store.set_timeout(seconds)
    if op == "compare_sets":
        return store.compare_sets(call_args), held
    if op == "set":
        store.set(*call_args)
        return None, held
    counted = store.add_then_get(*call_args)
    assert counted is not None  # an rdzv server
    added, checked, held = counted
    return [added, checked], held
