"""Many clients at once against one store server, for ``bench_store.py``.

Both measurements use the same minimal client against either server (rdzv's or torch's), so
they measure the server, not a client library: raw sockets sending requests pre-encoded
with torch's wire format (``rdzv.store.wire._wire``), one ``VALIDATE`` handshake per connection.

* :func:`aggregate`: ``clients`` processes (not threads: threads of one process would share
  one GIL and measure the client), each with one connection, each doing set+get pairs (a
  SET and a GET of the key just set, 16-byte values, sent in one write; the GET's reply is
  read and checked) in a loop during ``seconds`` from a common start instant. Aggregate
  pairs/s = all pairs completed in the window / ``seconds``.
* :func:`storm`: ``total`` clients in ``procs`` processes (each process drives its clients
  with one selector over non-blocking sockets), client ``i`` starting at
  ``start + window * i / total``; each connects, handshakes, sets and gets one key and
  measures from the start of its connect to the GET's reply, giving up after ``patience``
  seconds (counted as not served). A refused or reset attempt is
  retried after 10 ms and counted; SYN retransmissions (an accept queue that overflowed:
  the kernel drops the SYN and the client's kernel resends it after 1 s) are read from the
  socket's ``TCP_INFO`` (``tcpi_total_retrans``). Every connection stays open until all
  are served, so the server holds them all at once when its memory is read.
"""

from __future__ import annotations

import contextlib
import heapq
import multiprocessing
import os
import queue
import selectors
import socket
import statistics
import struct
import time
from typing import Any

import _memory

from rdzv.store.wire import _wire

_VALUE = b"0123456789abcdef"
_REPLY = _wire.encode_bytes(_VALUE)  # what a GET of a key set to _VALUE returns
_HELLO = _wire.encode_request(_wire.Validate())
_KEYS = 64  # distinct keys per aggregate client, cycled
_TCPI_TOTAL_RETRANS = 100  # offset of tcpi_total_retrans in struct tcp_info (linux/tcp.h)


def _pair(key: bytes) -> bytes:
    return _wire.encode_request(_wire.Set(key, _VALUE)) + _wire.encode_request(_wire.Get(key))


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(size - got)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _pairs_client(index: int, port: int, seconds: float, out: Any, go: Any, at: Any) -> None:
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(_HELLO)
        requests = [_pair(f"agg/{index}/{k}".encode()) for k in range(_KEYS)]
        out.put(("ready", index, None))
        go.wait(120)
        time.sleep(max(at.value - time.monotonic(), 0.0))
        end, done, wrong = at.value + seconds, 0, 0
        while time.monotonic() < end:
            sock.sendall(requests[done % _KEYS])
            wrong += _read_exactly(sock, len(_REPLY)) != _REPLY
            done += 1
        sock.close()
        out.put(("done", index, {"pairs": done, "wrong": wrong}))
    except Exception as exc:
        out.put(("done", index, {"error": f"{type(exc).__name__}: {exc}"}))


def aggregate(port: int, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` processes doing set+get pairs for ``seconds``: aggregate pairs/s."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rdzv.store.wire._wire", "_store_load"])
    out, go, at = ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=_pairs_client, args=(i, port, seconds, out, go, at))
        for i in range(clients)
    ]
    try:
        for p in procs:
            p.start()
        for _ in procs:
            kind, index, payload = out.get(timeout=120)
            if kind == "done":
                return {"error": f"client {index}: {payload['error']}"}
        at.value = time.monotonic() + 0.2 + clients * 0.002
        go.set()
        reports = [out.get(timeout=seconds + 120)[2] for _ in procs]
    finally:
        _reap(procs)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        return {"error": f"{len(errors)} clients failed: {errors[:3]}"}
    pairs = sum(r["pairs"] for r in reports)
    return {"pairs_per_s": pairs / seconds, "wrong": sum(r["wrong"] for r in reports)}


class _Dial:
    """One storm client's state: when it was due, when it began, its socket, its reply."""

    __slots__ = ("began", "due", "got", "i", "retries", "sent", "sock")

    def __init__(self, i: int, due: float) -> None:
        self.i, self.due, self.began, self.retries = i, due, 0.0, 0
        self.sock: socket.socket | None = None
        self.got, self.sent = b"", False


def _storm_group(
    indices: list[int],
    total: int,
    port: int,
    window: float,
    out: Any,
    go: Any,
    at: Any,
    stop: Any,
    patience: float,
) -> None:
    """One client process of the storm: its clients' connects, sends and reads, driven by
    one selector (non-blocking sockets), so a client starts when it is due, not when a
    thread of its own gets the CPU."""
    sel = selectors.DefaultSelector()
    results: list[dict[str, Any]] = []
    held: list[socket.socket] = []
    retry: list[tuple[float, int, _Dial]] = []
    out.put(("ready", indices[0], None))
    go.wait(120)
    due = sorted((at.value + window * i / total, i) for i in indices)
    launched = 0

    def finish(dial: _Dial, result: dict[str, Any]) -> None:
        if dial.sock is not None:
            sel.unregister(dial.sock)
            if "error" in result:
                dial.sock.close()
            else:
                held.append(dial.sock)  # stays open: the server holds every connection
        result.update(retries=dial.retries)
        results.append(result)

    def failed(dial: _Dial, error: str, now: float) -> None:
        """A refused or reset attempt: retried after 10 ms, within the patience."""
        assert dial.sock is not None
        sel.unregister(dial.sock)
        dial.sock.close()
        dial.sock, dial.got, dial.sent = None, b"", False
        dial.retries += 1
        if now - dial.began > patience:
            finish(dial, {"error": error})
        else:
            heapq.heappush(retry, (now + 0.01, dial.i, dial))

    def launch(dial: _Dial) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        dial.sock = sock
        sel.register(sock, selectors.EVENT_WRITE, dial)
        sock.connect_ex(("127.0.0.1", port))  # the outcome is read once it is writable

    while len(results) < len(indices):
        now = time.monotonic()
        while launched < len(due) and due[launched][0] <= now:
            dial = _Dial(due[launched][1], due[launched][0])
            dial.began = now
            launch(dial)
            launched += 1
        while retry and retry[0][0] <= now:
            launch(heapq.heappop(retry)[2])
        wake = [now + 0.05]
        if launched < len(due):
            wake.append(due[launched][0])
        if retry:
            wake.append(retry[0][0])
        for key, _ in sel.select(max(min(wake) - now, 0.0)):
            dial, sock = key.data, key.fileobj
            assert isinstance(sock, socket.socket)
            now = time.monotonic()
            if not dial.sent:
                error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if error:
                    failed(dial, os.strerror(error), now)
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.send(_HELLO + _pair(f"storm/{dial.i}".encode()))  # ~70 bytes: whole
                dial.sent = True
                sel.modify(sock, selectors.EVENT_READ, dial)
                continue
            try:
                chunk = sock.recv(len(_REPLY))
            except ConnectionResetError as exc:
                failed(dial, str(exc), now)
                continue
            if not chunk:
                finish(dial, {"error": "the server closed the connection"})
                continue
            dial.got += chunk
            if len(dial.got) >= len(_REPLY):
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
                (retrans,) = struct.unpack_from("I", info, _TCPI_TOTAL_RETRANS)
                result = {"ok": dial.got == _REPLY, "latency": now - dial.began}
                finish(dial, dict(result, late=dial.began - dial.due, retrans=retrans))
        now = time.monotonic()
        for key in list(sel.get_map().values()):  # past its patience: not served
            if now - key.data.began > patience:
                finish(key.data, {"error": f"not served within {patience:g} s"})
    out.put(("served", indices[0], results))
    stop.wait(patience + 120)  # hold every connection until the server's memory was read
    for sock in held:
        sock.close()
    sel.close()


def storm(
    port: int, server_pid: int, total: int, procs: int, window: float, patience: float
) -> dict[str, Any]:
    """``total`` clients connecting within ``window`` seconds (threads in ``procs``
    processes), each giving up ``patience`` seconds after it began; latencies, retries, and
    the server's memory with every connection open."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rdzv.store.wire._wire", "_store_load"])
    out, go, at, stop = ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0), ctx.Event()
    blocks = [list(range(k, total, procs)) for k in range(min(procs, total))]  # interleaved
    workers = [
        ctx.Process(
            target=_storm_group,
            args=(block, total, port, window, out, go, at, stop, patience),
        )
        for block in blocks
    ]
    before = _memory.rollup_kib(server_pid).get("Rss", 0) / _memory.MIB
    try:
        for w in workers:
            w.start()
        for _ in workers:
            out.get(timeout=120)
        at.value = time.monotonic() + 0.5
        go.set()
        results: list[dict[str, Any]] = []
        for _ in workers:
            try:
                results += out.get(timeout=window + patience + 120)[2]
            except queue.Empty:
                break
        rss = _memory.rollup_kib(server_pid).get("Rss", 0) / _memory.MIB
        peak = _memory.peak_rss_kib(server_pid) / _memory.MIB
        stop.set()
    finally:
        stop.set()
        _reap(workers)
    served = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    latencies = sorted(r["latency"] for r in served)
    late = sorted(r["late"] for r in served)
    return {
        "clients": total,
        "served": len(served),
        "correct": sum(1 for r in served if r["ok"]),
        "errors": sorted(set(errors))[:3],
        "retried": sum(1 for r in results if r["retries"]),
        "syn_retransmitted": sum(1 for r in served if r["retrans"]),
        "p50_ms": 1000 * statistics.median(latencies) if latencies else None,
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else None,
        "max_ms": 1000 * latencies[-1] if latencies else None,
        "max_start_late_ms": 1000 * late[-1] if late else None,
        "server_rss_before_mib": before,
        "server_rss_mib": rss,
        "server_peak_rss_mib": peak,
    }


def _reap(procs: list[Any]) -> None:
    """Join ``procs``; end the ones still alive by PID."""
    for p in procs:
        if p.pid is None:  # never started
            continue
        p.join(timeout=10)
        if p.is_alive() and p.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, 9)
            p.join(timeout=5)
