"""Toxics added, updated and removed on a live connection lose and reorder no data."""

from __future__ import annotations

import itertools
import struct
import sys
import threading
import time
from array import array

from proxy_helpers import UpstreamServer, connect

from harness.proxy.client import ToxiproxyClient

MIN_VALUES, MIN_CHURNS, MAX_SECONDS = 65_535, 40, 120
END = 0xFFFFFFFF
CHURN = [
    ("latency", {"latency": 2, "jitter": 2}),
    ("slicer", {"average_size": 64, "size_variation": 32, "delay": 10}),
    ("noop", {}),
    ("bandwidth", {"rate": 50_000}),
    ("latency", {"latency": 0, "jitter": 0}),
]


def check_in_order(values: array, expected: int) -> int:
    """Assert ``values`` continue the sequence at ``expected``; return the next expected."""
    wanted = array("I", range(expected, expected + len(values)))
    if values != wanted:
        at = next(
            i for i, (got, want) in enumerate(zip(values, wanted, strict=True)) if got != want
        )
        raise AssertionError(f"value {expected + at} arrived as {values[at]}")
    return expected + len(values)


def test_every_value_arrives_in_order_while_toxics_churn(
    toxiproxy_server: ToxiproxyClient, upstream: UpstreamServer, name: str
) -> None:
    assert array("I").itemsize == 4
    proxy = toxiproxy_server.create_proxy(name, upstream.address)
    done = threading.Event()
    churns = [0]
    failures: list[BaseException] = []

    def churn() -> None:
        try:
            for n in itertools.count():
                if done.is_set():
                    return
                kind, attributes = CHURN[n % len(CHURN)]
                stream, toxic = ("upstream", "downstream")[n % 2], f"churn_{n}"
                toxiproxy_server.add_toxic(
                    name, kind, stream=stream, name=toxic, attributes=attributes
                )
                toxiproxy_server.update_toxic(name, toxic, toxicity=0.5)
                toxiproxy_server.remove_toxic(name, toxic)
                churns[0] = n + 1
        except BaseException as exc:
            failures.append(exc)

    def write() -> None:
        try:
            value, give_up = 0, time.monotonic() + MAX_SECONDS
            while value < MIN_VALUES or (churns[0] < MIN_CHURNS and time.monotonic() < give_up):
                sock.sendall(struct.pack("!7I", *range(value, value + 7)))
                value += 7
            sock.sendall(struct.pack("!I", END))
        except BaseException as exc:
            failures.append(exc)

    expected, pending = 0, bytearray()
    with connect(proxy.listen_address, timeout=30) as sock:
        threads = [threading.Thread(target=churn), threading.Thread(target=write)]
        for thread in threads:
            thread.start()
        try:
            while True:
                chunk = sock.recv(1 << 16)
                assert chunk, f"the proxy closed the connection after {expected} values"
                pending += chunk
                usable = len(pending) - len(pending) % 4
                values = array("I", bytes(pending[:usable]))
                del pending[:usable]
                if sys.byteorder == "little":
                    values.byteswap()
                if values and values[-1] == END:
                    expected = check_in_order(values[:-1], expected)
                    break
                expected = check_in_order(values, expected)
        finally:
            done.set()
            for thread in threads:
                thread.join(timeout=30)
    assert not failures, failures
    assert not pending
    assert expected >= MIN_VALUES
    assert churns[0] >= MIN_CHURNS, f"only {churns[0]} add/update/remove cycles overlapped"
