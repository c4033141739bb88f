"""``TCPStore``: torch's client API over torch's wire protocol, with honest deadlines.

Differences from torch's client, all deliberate:

* Against an rdzv server, ``get``/``multi_get``/blocking ``queue_pop`` send WAIT and the read
  in one round trip (the handshake learns whether the server serves requests in order
  behind a WAIT); against a torch server they take torch's two round trips.
* Connect retries pause 10-20 ms after a refusal in the first second (node 0 still
  starting), else 25 ms-1 s backoff with jitter (torch: 0.5 s-60 s), bounded by the
  timeout; the final error says what was tried, for how long, how often and why it failed.
* Timeout errors subclass ``TimeoutError``, connection errors ``ConnectionError``; every
  error names the endpoint. No reverse DNS, ever.
* Every blocking call ends by the caller's deadline, or at most ``rdzv.store.client._waits.GRACE``
  (0.4 s) after it: the connect, each request and its reply, and, after a timed-out wait,
  the ``CANCEL_WAIT`` (torch waits for its answer without bound). A store that does not
  answer the cancel either gets its connection closed, and the timeout error says so.
* A connection that failed once stays failed: every later call raises
  ``StoreClosedError`` at once, and a ``set`` on a connection the store has already closed
  raises instead of being silently lost.
* ``close()`` releases the connection and, for a master, the embedded server.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from datetime import timedelta

from rdzv.errors import (
    QueueEmptyError,
)
from rdzv.store.base import Store
from rdzv.store.client._connect import (
    Connected,
    LazyRandom,
    connect,
    endpoint_text,
)
from rdzv.store.client._extensions import Extensions, amount_of
from rdzv.store.client._hosting import TENANTS, await_workers, local_address
from rdzv.store.client._replies import bytes_list_reader, bytes_reader, queue_pop_reader
from rdzv.store.client._requests import Requests
from rdzv.store.client._requests import deadline_in as _deadline
from rdzv.store.client._transport import Channel
from rdzv.store.wire import _wire
from rdzv.store.wire._convert import (
    DEFAULT_TIMEOUT,
    Timeout,
    format_ms,
    to_bytes,
    to_seconds,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, TypeVar

    _T = TypeVar("_T")

if TYPE_CHECKING:  # imported by a master only: a client that does not host never imports the server
    from rdzv.store.server import StoreServer

__all__ = ["TCPStore"]

_PREFIX: Final = b"/"
_INIT_KEY: Final = b"init/"
_DEFAULT_LIMITS: Final = _wire.Limits()  # made once, at import: never changed


class TCPStore(Extensions, Store):
    """A client of a TCPStore-protocol server; with ``is_master`` it also hosts one.

    Args mirror torch's ``TCPStore``; ``timeout`` bounds every blocking operation and, unless
    ``connect_timeout`` is given, the connection attempts too. ``seed`` seeds the backoff
    jitter (reproducible runs). ``use_libuv`` is accepted for compatibility and ignored.
    ``server`` is the :class:`~rdzv.store.server.StoreServer` a master hosts (None: a client).

    Raises:
        ValueError: ``world_size`` is 0 or ``port`` is outside 0..65535.
        StoreBindError: ``is_master`` and the port could not be bound.
        StoreConnectionError: no store answered before the connect deadline.
        StoreTimeoutError: the master waited for ``world_size`` members in vain.

    Every operation may raise, besides what :class:`~rdzv.store.base.Store` documents:

    * ``StoreTimeoutError``: no reply (or, for ``get``/``wait``/``multi_get``/``queue_pop``,
      the keys) by the timeout; the message names the operation or the keys and the
      timeout. It is raised at most 0.4 s after the deadline; unless the store answered
      the cancel of a wait, the connection was closed.
    * ``StoreClosedError``: the connection ended (``.seen`` says how: ``"eof"``,
      ``"reset"``, ...), or had already ended or been closed by an earlier call (raised at
      once, nothing is sent). A ``set``/``multi_set``/``append``/``queue_push`` raises it
      when the store had already closed the connection, instead of losing the write.
    * ``StoreProtocolError``: the peer's reply broke the protocol (the connection is closed).
    """

    server: StoreServer | None
    _finalizer: weakref.finalize[[StoreServer], TCPStore] | None

    def __init__(
        self,
        host_name: str,
        port: int,
        world_size: int | None = None,
        is_master: bool = False,
        timeout: Timeout = DEFAULT_TIMEOUT,
        wait_for_workers: bool = True,
        multi_tenant: bool = False,
        master_listen_fd: int | None = None,
        use_libuv: bool = True,
        *,
        connect_timeout: Timeout | None = None,
        seed: int | None = None,
        limits: _wire.Limits | None = None,
    ) -> None:
        if world_size == 0:
            raise ValueError("TCPStore world size cannot be 0")
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"TCPStore port must be an integer in 0..65535, got {port!r}")
        seconds = to_seconds(timeout)
        connect_seconds = seconds if connect_timeout is None else to_seconds(connect_timeout)
        self._fields(host_name, seconds, connect_seconds, world_size, use_libuv, limits)
        connect_host = host_name
        if is_master:
            from rdzv.store.server import StoreServer

            self.server = TENANTS.acquire(
                host_name,
                port,
                multi_tenant,
                lambda: StoreServer(
                    host_name,
                    port,
                    limits=limits,
                    listen_fd=master_listen_fd,
                    expected_clients=world_size or 0,
                ),
            )
            self._finalizer = weakref.finalize(self, TENANTS.release, self.server)
            port = self.server.port
            connect_host = local_address(self.server)
        self._port = port
        self._endpoint = endpoint_text(host_name, port)
        try:
            rng = LazyRandom(seed)
            conn = connect(connect_host, port, self._connect_timeout, rng, self._limits)
        except BaseException:
            self.close()
            raise
        self._attach(conn)
        if world_size is not None and wait_for_workers:
            self._raw_add(_INIT_KEY, 1)
            if is_master:
                await_workers(
                    lambda deadline: self._raw_add(_INIT_KEY, 0, deadline),
                    world_size,
                    self._timeout,
                    self._endpoint,
                )

    @classmethod
    def over(
        cls,
        conn: Connected,
        host_name: str,
        port: int,
        world_size: int | None,
        timeout: float,
        limits: _wire.Limits | None = None,
    ) -> TCPStore:
        """A client over ``conn`` (to ``host_name:port``, made by ``_express``), as a client
        ``TCPStore`` made with these arguments and ``wait_for_workers=False`` is."""
        store = cls.__new__(cls)
        store._fields(host_name, timeout, timeout, world_size, True, limits)
        store._port = port
        store._endpoint = conn.channel.endpoint
        store._attach(conn)  # (the channel sets its socket blocking when it first waits)
        return store

    def _fields(
        self,
        host: str,
        timeout: float | None,
        connect_timeout: float | None,
        world_size: int | None,
        use_libuv: bool,
        limits: _wire.Limits | None,
    ) -> None:
        """What a store holds before it connects."""
        self._host = host
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._world_size = world_size
        self._use_libuv = use_libuv
        self._limits = limits or _DEFAULT_LIMITS
        self.server = None
        self._finalizer = None

    def _attach(self, conn: Connected) -> None:
        """Take ``conn``, this store's connection."""
        self._channel: Channel = conn.channel
        self._requests = Requests(conn.channel, self._endpoint, conn.pipelined)
        self.connect_attempts = conn.attempts

    # --- properties ----------------------------------------------------------------

    @property
    def host(self) -> str:
        """The host name this store was created with."""
        return self._host

    @property
    def port(self) -> int:
        """The server port (the real one when created with port 0 as master)."""
        return self._port

    @property
    def libuvBackend(self) -> bool:
        """Whatever ``use_libuv`` said (the backend here is pure Python either way)."""
        return self._use_libuv

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=-1) if self._timeout is None else timedelta(seconds=self._timeout)

    @property
    def pipelined(self) -> bool:
        """Whether the server serves a request sent behind a WAIT (an rdzv server; its
        handshake says so): WAIT and the read after it take one round trip."""
        return self._requests.pipelined

    def set_timeout(self, timeout: Timeout) -> None:
        self._timeout = to_seconds(timeout)

    def __repr__(self) -> str:
        role = "master" if self.server is not None else "client"
        return f"TCPStore({self._endpoint}, {role}, timeout={format_ms(self._timeout)})"

    # --- lifecycle ---------------------------------------------------------------------

    def clone(self, timeout: Timeout | None = None) -> TCPStore:
        """A new connection to the same server, bounded by this one's timeout or ``timeout``
        (connecting included; this connection's own timeout is left as it is)."""
        host = self._host if self.server is None else local_address(self.server)
        bound = self.timeout if timeout is None else timeout
        return TCPStore(host, self._port, None, False, bound, False)

    def close(self) -> None:
        """Close the connection; a master also stops its server. Idempotent."""
        channel = getattr(self, "_channel", None)
        if channel is not None:
            channel.close()
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> TCPStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- operations ------------------------------------------------------------------

    def set(self, key: str, value: str | bytes) -> None:
        self._send(_wire.key_value_frame(_wire.Op.SET, self._key(key), to_bytes(value)), "SET")

    def get(self, key: str) -> bytes:
        raw = self._key(key)
        seconds = self._timeout
        value = self._requests.wait_then(
            (raw,),
            _wire.Get(raw),
            bytes_reader(self._limits),
            "GET",
            [key],
            seconds,
            _deadline(seconds),
        )
        assert value is not None
        return value

    def add(self, key: str, amount: int) -> int:
        return self._raw_add(self._key(key), amount)

    def compare_set(self, key: str, expected: str | bytes, desired: str | bytes) -> bytes:
        req = _wire.CompareSet(self._key(key), to_bytes(expected), to_bytes(desired))
        return self._call(req, bytes_reader(self._limits), "COMPARE_SET")

    def wait(self, keys: Sequence[str], timeout: Timeout | None = None) -> None:
        seconds = self._timeout if timeout is None else to_seconds(timeout)
        raw = tuple(self._key(k) for k in keys)
        if raw:
            deadline = _deadline(seconds)
            self._requests.wait_then(raw, None, None, "WAIT", list(keys), seconds, deadline)

    def check(self, keys: Sequence[str]) -> bool:
        req = _wire.Check(tuple(self._key(k) for k in keys))
        return self._call(req, _wire.read_u8, "CHECK") == _wire.READY

    def delete_key(self, key: str) -> bool:
        return bool(self._call(_wire.DeleteKey(self._key(key)), _wire.read_i64, "DELETE_KEY"))

    def num_keys(self) -> int:
        return self._call(_wire.GetNumKeys(), _wire.read_i64, "GETNUMKEYS")

    def multi_get(self, keys: Sequence[str]) -> list[bytes]:
        raw = tuple(self._key(k) for k in keys)
        if not raw:
            return []
        read = bytes_list_reader(self._limits, len(raw))
        seconds = self._timeout
        values = self._requests.wait_then(
            raw, _wire.MultiGet(raw), read, "MULTI_GET", list(keys), seconds, _deadline(seconds)
        )
        assert values is not None
        return values

    def multi_set(self, keys: Sequence[str], values: Sequence[str | bytes]) -> None:
        self._check_multi(keys, values)
        items = tuple((self._key(k), to_bytes(v)) for k, v in zip(keys, values, strict=True))
        self._send(_wire.encode_request(_wire.MultiSet(items)), "MULTI_SET")

    def append(self, key: str, value: str | bytes) -> None:
        frame = _wire.key_value_frame(_wire.Op.APPEND, self._key(key), to_bytes(value))
        self._send(frame, "APPEND")

    def list_keys(self) -> list[str]:
        limits = self._limits
        raw = self._call(
            _wire.ListKeys(),
            lambda buf, pos: _wire.read_counted_bytes_list(buf, pos, limits),
            "LIST_KEYS",
        )
        return [k[1:].decode(errors="surrogateescape") for k in raw if k.startswith(_PREFIX)]

    def queue_push(self, key: str, value: str | bytes) -> None:
        frame = _wire.key_value_frame(_wire.Op.QUEUE_PUSH, self._key(key), to_bytes(value))
        self._send(frame, "QUEUE_PUSH")

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        raw = self._key(key)
        read = queue_pop_reader(self._limits)
        seconds = self._timeout
        deadline = _deadline(seconds)
        while True:
            if block:
                # One deadline for the whole pop, even when another popper wins a race.
                value = self._requests.wait_then(
                    (raw,), _wire.QueuePop(raw), read, "QUEUE_POP", [key], seconds, deadline
                )
            else:
                value = self._call(_wire.QueuePop(raw), read, "QUEUE_POP")
            if value is not None:
                return value
            if not block:
                raise QueueEmptyError(f"queue is empty: {key!r} at {self._endpoint}")

    def queue_len(self, key: str) -> int:
        return self._call(_wire.QueueLen(self._key(key)), _wire.read_i64, "QUEUE_LEN")

    # --- machinery -------------------------------------------------------------------

    @staticmethod
    def _key(key: str) -> bytes:
        return _PREFIX + to_bytes(key, "key")

    def _send(self, frame: bytes, op: str) -> None:
        """Send the encoded request ``frame``, which has no reply (see
        :meth:`Requests.send`)."""
        self._requests.send(frame, op, self._timeout)

    def _call(
        self,
        req: _wire.Request,
        read: _wire.Reader[_T],
        op: str,
        deadline: float | None = None,
        then: bytes = b"",
    ) -> _T:
        """Send ``req`` (followed, in the same write, by ``then``: encoded requests that have
        no reply) and read its reply, both by ``deadline`` (default: the store timeout from
        now; see :meth:`Requests.call`)."""
        if deadline is None:
            deadline = _deadline(self._timeout)
        data = _wire.encode_request(req) + then
        return self._requests.call(data, read, op, deadline, self._timeout)

    def _raw_add(
        self, raw: bytes, amount: int, deadline: float | None = None, then: bytes = b""
    ) -> int:
        return self._call(_wire.Add(raw, amount_of(amount)), _wire.read_i64, "ADD", deadline, then)
