"""The store server's event loop: one thread, one selector, timers and a call queue.

The server needs little of an event loop: sockets that say when they can be read or written,
timers (the partial-request bound, the drop-log summary), callbacks queued from the loop
thread itself (``call_soon``) and from other threads (``call_soon_threadsafe``, which wakes
the loop through a socket pair). :class:`EventLoop` is exactly that, on the standard
library's :mod:`selectors` (epoll on Linux) and nothing else: importing it costs about a
millisecond, where asyncio costs tens (ssl, concurrent.futures, ...), at the moment every node
of a rendezvous starts.

Invariants:

1. Everything registered runs on the loop thread, one callback at a time; only
   :meth:`EventLoop.call_soon_threadsafe` and :meth:`EventLoop.stop` may be called from another
   thread.
2. Callbacks queued before a loop iteration run in that iteration, in the order queued;
   those they queue run in the next one (a callback that queues itself cannot starve I/O).
3. A callback or handler that raises is logged and the loop goes on: one connection's bug
   never stops the server.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Final

__all__ = ["READ", "WRITE", "EventLoop", "Handler", "Timer"]

_log = logging.getLogger("rdzv.server")

Handler = Callable[[int], None]
"""``handler(mask)``: a registered file is ready for the events in ``mask``."""

#: The selector event masks, for callers that import no ``selectors`` themselves.
READ: Final = selectors.EVENT_READ
WRITE: Final = selectors.EVENT_WRITE


class Timer:
    """A callback due at a time of :meth:`EventLoop.time`; :meth:`cancel` keeps it from running."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Keep the callback from running (it stays in the heap until it is due)."""
        self.cancelled = True


class EventLoop:
    """A selector loop for one thread (see the module doc)."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._ready: deque[Callable[[], None]] = deque()
        self._stopping = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, READ, self._drain_wakeups)

    @staticmethod
    def time() -> float:
        """The loop's clock (monotonic seconds)."""
        return time.monotonic()

    # --- scheduling -------------------------------------------------------------------

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the loop thread once :meth:`time` reaches ``when``."""
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` in the next iteration (loop thread only)."""
        self._ready.append(callback)

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the loop thread soon; callable from any thread.

        Raises:
            RuntimeError: the loop has stopped for good (nothing would run the callback).
        """
        if self._closed:
            raise RuntimeError("the store server's loop has stopped")
        self._ready.append(callback)  # deque.append is atomic
        with contextlib.suppress(BlockingIOError, OSError):  # full: a wake-up is pending
            self._wake_w.send(b"\0")

    def stop(self) -> None:
        """Make :meth:`run_forever` return after the current iteration (any thread)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def is_loop_thread(self) -> bool:
        """Whether the caller runs on the thread inside :meth:`run_forever`."""
        return threading.current_thread() is self._thread

    # --- running ----------------------------------------------------------------------

    def run_forever(self) -> None:
        """Serve until :meth:`stop`, then close the selector and the wake-up sockets."""
        self._thread = threading.current_thread()
        select = self.selector.select
        ready = self._ready
        timers = self._timers
        try:
            while not self._stopping:
                if ready:
                    timeout: float | None = 0.0
                elif timers:
                    timeout = max(timers[0][0] - time.monotonic(), 0.0)
                else:
                    timeout = None
                for key, mask in select(timeout):
                    try:
                        key.data(mask)
                    except Exception:  # invariant 3
                        _log.exception("store server: a handler of fd %s failed", key.fd)
                if timers:
                    self._run_due_timers()
                for _ in range(len(ready)):  # invariant 2
                    callback = ready.popleft()
                    try:
                        callback()
                    except Exception:  # invariant 3
                        _log.exception("store server: a scheduled callback failed")
        finally:
            self._closed = True
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _run_due_timers(self) -> None:
        timers = self._timers
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)[2]
            if timer.cancelled:
                continue
            try:
                timer.callback()
            except Exception:  # invariant 3
                _log.exception("store server: a timer failed")

    def _drain_wakeups(self, mask: int) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._wake_r.recv(4096):
                pass
