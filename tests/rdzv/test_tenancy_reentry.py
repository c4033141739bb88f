"""A master's release re-entered from a finalizer (rdzv/store/client/_hosting.py): the
garbage collector may run a dropped master's finalizer in the thread that is updating the
shared-server table; the release must be deferred, not wait on its own thread's lock."""

from __future__ import annotations

import threading
from typing import Any

from rdzv.store.client._hosting import Tenancy

BOUND = 60.0  # seconds: a deadlock fails the test instead of hanging the suite


class FakeServer:
    """What the table uses of a StoreServer: a port, start, running, close."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.running = False
        self.closed = 0

    def start(self) -> FakeServer:
        self.running = True
        return self

    def close(self) -> None:
        self.closed += 1
        self.running = False


def _in_thread(work: Any) -> None:
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), "the release waited on a lock its own thread held"
    assert not failed, failed


def test_a_release_that_re_enters_an_acquire_is_deferred_and_its_server_closed() -> None:
    tenants = Tenancy()
    dropped = tenants.acquire("127.0.0.1", 1001, True, lambda: FakeServer(1001))
    made: list[FakeServer] = []

    def make() -> FakeServer:  # as if the collector ran the dropped master's finalizer here
        tenants.release(dropped)
        assert dropped.closed == 0  # not closed inside the table's update
        made.append(FakeServer(1002))
        return made[0]

    _in_thread(lambda: tenants.acquire("127.0.0.1", 1002, True, make))

    assert dropped.closed == 1 and made[0].running
    again = tenants.acquire("127.0.0.1", 1001, True, lambda: FakeServer(1001))
    assert again is not dropped  # its last user left: port 1001 starts afresh


def test_a_release_that_re_enters_a_release_keeps_both_counts() -> None:
    tenants = Tenancy()
    first = tenants.acquire("127.0.0.1", 2001, True, lambda: FakeServer(2001))
    shared = tenants.acquire("127.0.0.1", 2002, True, lambda: FakeServer(2002))
    assert tenants.acquire("127.0.0.1", 2002, True, lambda: FakeServer(2002)) is shared

    original_forget = tenants._forget

    def forget(server: Any) -> bool:  # the collector strikes inside the first update
        if server is first:
            tenants.release(shared)
        return original_forget(server)

    tenants._forget = forget  # type: ignore[method-assign]
    _in_thread(lambda: tenants.release(first))

    assert first.closed == 1
    assert shared.closed == 0  # one of its two users is left
    tenants._forget = original_forget  # type: ignore[method-assign]
    tenants.release(shared)
    assert shared.closed == 1
