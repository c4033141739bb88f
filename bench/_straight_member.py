"""A member's happy path written straight, for ``bench/ab_member.py --straight``.

What a compact member path could cost at best: the same requests as the library's member
(handshake, the two claims, the count with the confirmation, the append, the CHECK of
``arbiter`` and the verdict's WAIT+GET in one write, then the ack), on a plain socket, in one
function, with no retries, deadlines, events or way out: any other reply fails an assert.
The hosting node (the library's, in-process store server) cannot tell it from the library's
member. Not a client: a measuring stick.

With ``pipelined`` (``ab_member.py --straight --pipelined``) the two claims go in the
handshake's write, one round trip fewer: what that protocol change would save a member
(the library does not do it: a handshake that fails after the claims landed would leave
them written by a closed connection, which the hosting node reads as a lost member).
"""

from __future__ import annotations

import json
import os
import socket
import time

from rdzv.rendezvous._round_state import Identity, RoundKeys
from rdzv.store.wire import _wire as w

_U64 = 8


def _replies_in(buf: bytes, pos: int, count: int) -> int | None:
    """The end of ``count`` length-prefixed replies from ``pos``, or None (incomplete)."""
    for _ in range(count):
        if len(buf) < pos + _U64:
            return None
        pos += _U64 + int.from_bytes(buf[pos : pos + _U64], "little")
    return pos if len(buf) >= pos else None


def join(
    host: str,
    port: int,
    rank: int,
    world_size: int,
    run_id: str,
    timeout: float,
    pipelined: bool = False,
) -> None:
    """Join round 0 of ``run_id`` as ``rank`` (not the hosting node) and ack its verdict
    (``pipelined``: the claims sent with the handshake)."""
    me, keys = Identity.local(rank, world_size), RoundKeys(run_id)
    raw = me.raw
    deadline = time.monotonic() + timeout

    def key(name: str) -> bytes:
        return b"/" + name.encode()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # an IPv4 literal: no lookup
    sock.settimeout(timeout)
    sock.connect((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    nonce = os.getpid() & 0xFFFFFFFF
    probe = w.keys_frame(w.Op.CHECK, (w.PROBE_KEY,))
    cs = w.compare_set_frame
    claims = cs(key(keys.of(0, "first")), b"", raw) + cs(key(keys.claim(0, rank)), b"", raw)
    handshake = w.encode_request(w.Validate()) + w.ping_frame(nonce) + probe
    sock.sendall(handshake + claims if pipelined else handshake)
    buf = b""
    while len(buf) < 5 or (pipelined and _replies_in(buf, 5, 2) is None):
        buf += sock.recv(65536)
    assert int.from_bytes(buf[:4], "little") == nonce and buf[4] == w.READY, buf
    buf = buf[5:]
    if not pipelined:
        sock.sendall(claims)
    while _replies_in(buf, 0, 2) is None:
        buf += sock.recv(65536)
    first_end = _U64 + int.from_bytes(buf[:_U64], "little")
    assert buf[first_end + _U64 :] == raw, "the claim is held by another"
    due = f"{deadline - time.monotonic():.3f} {deadline:.6f} ".encode() + raw
    done = key(keys.of(0, "done"))
    sock.sendall(
        b"".join(
            (
                w.add_frame(key(keys.of(0, "count")), 1),
                w.key_value_frame(w.Op.SET, key(keys.confirmed(0, rank)), due),
                w.key_value_frame(w.Op.APPEND, key(keys.of(0, "joined")), f"{rank},".encode()),
                w.keys_frame(w.Op.CHECK, (key(keys.of(0, "arbiter")),)),
                w.keys_frame(w.Op.WAIT, (done,)),
                w.key_frame(w.Op.GET, done),
            )
        )
    )
    buf = b""  # ADD (i64), CHECK (u8), WAIT (u8), then GET's value
    while _replies_in(buf, 10, 1) is None:
        buf += sock.recv(65536)
    assert buf[8] == w.READY, "the hosting node does not arbitrate"
    verdict = json.loads(buf[10 + _U64 :])
    assert verdict["status"] == "complete", verdict
    sock.sendall(w.key_value_frame(w.Op.SET, key(keys.of(0, f"ack/{rank}")), b"1"))
    sock.close()
