"""A client cut by a bound of node 0's store reaches the harness's record of node 0, naming
the bound, the peer and why (issue 29 §2: "when one does cut a client, node 0's log says
which bound and why"). The node's forwarding of rdzv's events (what a node process and a
packed node install) is fed by a real store server on loopback that cuts a raw client."""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Iterator
from typing import Any

from harness.world.messages import Event
from harness.world.process.reporting import forward_logs
from rdzv.events import COPY_ATTR
from rdzv.store.server import StoreServer
from rdzv.store.wire import _wire


@contextlib.contextmanager
def _forwarded(node: int) -> Iterator[queue.Queue[Event]]:
    """rdzv's events of this process forwarded as node ``node``'s, as a node process does;
    the loggers are put back afterwards."""
    loggers = [logging.getLogger(name) for name in ("rdzv", "torch.distributed")]
    saved = [(lg.level, list(lg.handlers), lg.propagate) for lg in loggers]
    events: queue.Queue[Event] = queue.Queue()
    forward_logs(node, events)  # type: ignore[arg-type]
    try:
        yield events
    finally:
        for lg, (level, handlers, propagate) in zip(loggers, saved, strict=True):
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate = propagate


def _waiting(server: StoreServer) -> threading.Event:
    """Set (on the server's loop) once a connection is blocked in a WAIT (started in the
    KV's ``feed``, or in its ``wait_then`` on the fast path)."""
    event = threading.Event()
    kv = server.kv
    feed, wait_then = kv.feed, kv.wait_then

    def fed(conn: Any, requests: Any, now: float) -> Any:
        outcome = feed(conn, requests, now)
        if kv.waiting():
            event.set()
        return outcome

    def then(conn: Any, key: bytes, request: Any, now: float) -> None:
        wait_then(conn, key, request, now)
        event.set()

    kv.feed = fed  # type: ignore[method-assign]
    kv.wait_then = then  # type: ignore[method-assign]
    return event


def test_a_client_cut_by_node_0s_store_is_in_node_0s_record_with_the_bound_and_why() -> None:
    with (
        _forwarded(0) as events,
        StoreServer("127.0.0.1", 0) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock,
    ):
        waiting = _waiting(server)
        sock.sendall(_wire.encode_request(_wire.Validate()))
        sock.sendall(_wire.encode_request(_wire.Wait((b"/never",))))
        assert waiting.wait(30), "the wait never reached the server"
        with contextlib.suppress(OSError):  # cut while sending: what is asserted below
            sock.sendall(_wire.encode_request(_wire.Ping(1)) * 4097)
        sock.settimeout(30)
        with contextlib.suppress(ConnectionResetError):
            while sock.recv(65536):
                pass
        peer = f"127.0.0.1:{sock.getsockname()[1]}"
    forwarded = []
    while not events.empty():
        forwarded.append(events.get_nowait())
    (cut,) = [e for e in forwarded if e.name == "store_client_cut"]
    assert cut.node == 0
    assert (cut.fields["bound"], cut.fields["peer"]) == ("requests held behind a WAIT", peer)
    assert "more than 4096 requests pipelined behind a pending WAIT" in cut.fields["message"]


def test_an_rdzv_event_shown_on_torchs_logger_too_is_forwarded_once() -> None:
    """The torchrun plugin logs a copy of every rdzv record on torch's elastic logger
    (``rdzv.torchrun``), and a node forwards both "rdzv" and "torch.distributed": the copy
    (marked ``COPY_ATTR``) is not forwarded again."""
    with _forwarded(0) as events:
        record = logging.makeLogRecord(
            {
                "name": "rdzv.server",
                "levelno": logging.WARNING,
                "msg": "cut",
                "rdzv_event": {"event": "store_client_cut", "peer": "p"},
            }
        )
        logging.getLogger("rdzv.server").handle(record)

        copy = logging.makeLogRecord(dict(record.__dict__, name="torch.distributed.elastic"))
        setattr(copy, COPY_ATTR, True)
        logging.getLogger("torch.distributed.elastic").handle(copy)
        logging.getLogger("torch.distributed.elastic").handle(
            logging.makeLogRecord(dict(record.__dict__, name="torch.distributed.elastic"))
        )  # torch's own record of an event (no copy): forwarded
    forwarded = [events.get_nowait().name for _ in range(events.qsize())]
    assert forwarded == ["store_client_cut", "store_client_cut"]
