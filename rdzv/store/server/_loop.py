"""The store server's event loop: one thread, one poller, timers and a call queue.

The server needs little of an event loop: sockets that say when they can be read or written,
timers (the partial-request bound, the drop-log summary), callbacks queued from the loop
thread itself (``call_soon``) and from other threads (``call_soon_threadsafe``, which wakes
the loop through a socket pair). :class:`EventLoop` is exactly that, on the standard
library's :mod:`select` (``epoll`` on Linux, ``poll`` elsewhere) and nothing else: importing
it costs about a millisecond, where asyncio costs tens (ssl, concurrent.futures, ...), at the
moment every node of a rendezvous starts. The poller is used directly, not through
:mod:`selectors`: its per-event bookkeeping is a measurable part of a request's cost.

Invariants:

1. Everything registered runs on the loop thread, one callback at a time; only
   :meth:`EventLoop.call_soon_threadsafe` and :meth:`EventLoop.stop` may be called from another
   thread.
2. Callbacks queued before a loop iteration run in that iteration, in the order queued;
   those they queue run in the next one (a callback that queues itself cannot starve I/O).
3. A callback or handler that raises is logged and the loop goes on: one connection's bug
   never stops the server.
4. A call from another thread either runs (once more after :meth:`EventLoop.stop`, if it
   was queued before the loop ended) or is refused with ``RuntimeError``; it is never lost.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

from rdzv.events import get_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final, Protocol

    class _Poller(Protocol):
        """What the loop needs of ``select.epoll`` and ``select.poll`` (timeouts aside)."""

        def register(self, fd: int, eventmask: int = ..., /) -> None: ...
        def modify(self, fd: int, eventmask: int, /) -> None: ...
        def unregister(self, fd: int, /) -> None: ...
        def poll(self, timeout: float | None = ..., /) -> list[tuple[int, int]]: ...


__all__ = ["READ", "WRITE", "EventLoop", "Handler", "Timer"]

_log = get_logger("rdzv.server")

Handler = Callable[[int], None]
"""``handler(mask)``: a registered file is ready for the events in ``mask``."""

#: The event masks a handler is registered for and called with.
READ: Final = select.POLLIN
WRITE: Final = select.POLLOUT
# An error or hang-up: reported to the handler as readable and writable (the next
# ``recv``/``send``/``accept`` returns the error).
_TROUBLE: Final = select.POLLERR | select.POLLHUP | select.POLLNVAL
_BOTH: Final = READ | WRITE


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
    """A poller loop for one thread (see the module doc)."""

    def __init__(self) -> None:
        if hasattr(select, "epoll"):
            self._poller: _Poller = select.epoll()
            self._scale = 1.0  # epoll's timeouts are seconds
        else:
            self._poller = select.poll()
            self._scale = 1000.0  # poll's are milliseconds
        self._handlers: dict[int, Handler] = {}
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._ready: deque[Callable[[], None]] = deque()
        self._stopping = False
        self._closed = False
        self._lock = threading.Lock()  # call_soon_threadsafe against the loop's end
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.register(self._wake_r, READ, self._drain_wakeups)

    @staticmethod
    def time() -> float:
        """The loop's clock (monotonic seconds)."""
        return time.monotonic()

    # --- files (loop thread only) ---------------------------------------------------------

    def register(self, sock: socket.socket, events: int, handler: Handler) -> None:
        """Call ``handler(mask)`` whenever ``sock`` is ready for ``events``."""
        fd = sock.fileno()
        self._poller.register(fd, events)
        self._handlers[fd] = handler

    def modify(self, sock: socket.socket, events: int) -> None:
        """Watch ``sock`` (registered) for ``events`` from now on."""
        self._poller.modify(sock.fileno(), events)

    def unregister(self, sock: socket.socket) -> None:
        """Stop watching ``sock`` (call it before closing the socket)."""
        fd = sock.fileno()
        self._poller.unregister(fd)
        del self._handlers[fd]

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
        with self._lock:  # invariant 4
            if self._closed:
                raise RuntimeError("the store server's loop has stopped")
            self._ready.append(callback)
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
        """Serve until :meth:`stop`, then close the poller and the wake-up sockets."""
        self._thread = threading.current_thread()
        poll = self._poller.poll
        handlers = self._handlers
        ready = self._ready
        timers = self._timers
        monotonic = time.monotonic
        scale, trouble, both = self._scale, _TROUBLE, _BOTH  # locals: this runs per read
        try:
            while not self._stopping:
                if ready:
                    timeout: float | None = 0.0
                elif timers:
                    timeout = max(timers[0][0] - monotonic(), 0.0) * scale
                else:
                    timeout = None
                for fd, events in poll(timeout):
                    handler = handlers.get(fd)
                    if handler is None:  # unregistered by a handler before it in this batch
                        continue
                    try:
                        handler(events | both if events & trouble else events)
                    except Exception:  # invariant 3
                        _log.exception("store server: a handler of fd %s failed", fd)
                if timers and timers[0][0] <= monotonic():
                    self._run_due_timers()
                if ready:
                    for _ in range(len(ready)):  # invariant 2
                        callback = ready.popleft()
                        try:
                            callback()
                        except Exception:  # invariant 3
                            _log.exception("store server: a scheduled callback failed")
        finally:
            with self._lock:  # invariant 4
                self._closed = True
                leftovers = list(ready)
                ready.clear()
            for callback in leftovers:
                try:
                    callback()
                except Exception:  # invariant 3
                    _log.exception("store server: a scheduled callback failed")
            close = getattr(self._poller, "close", None)  # epoll has one, poll has not
            if close is not None:
                close()
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
