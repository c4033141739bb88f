"""The proxy's event loop: stdlib asyncio with timers precise to tens of microseconds.

asyncio's epoll selector rounds every wait up to a whole millisecond, so a timer (a
latency toxic releasing a chunk) fires on average 0.5 ms and at worst 1 ms late; on top
of that, waking a sleeping thread costs a virtual machine 0.1 to 0.3 ms. The selector
below sleeps on the epoll descriptor with ``select()`` (microsecond timeout) until
``_SPIN`` seconds before the deadline, then polls ``epoll_wait(0)`` until the deadline,
returning at once if any socket becomes ready meanwhile. So a timer costs at most
``_SPIN`` of busy CPU, only when one is about to fire; waits without a deadline (the pure
relay hot path) block in ``epoll_wait`` as usual. Elsewhere than Linux the default
selector is used. (uvloop is not used: its timers have millisecond resolution.)
"""

from __future__ import annotations

import asyncio
import select
import selectors
import time

__all__ = ["new_event_loop"]

_SPIN = 0.0004


if hasattr(selectors, "EpollSelector"):

    class _PreciseEpollSelector(selectors.EpollSelector):
        """An epoll selector whose timed waits end within microseconds of the deadline."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is None or timeout <= 0:
                return super().select(timeout)
            deadline = time.monotonic() + timeout
            if timeout > _SPIN:
                select.select([self.fileno()], [], [], timeout - _SPIN)
            ready = super().select(0)
            while not ready and time.monotonic() < deadline:
                ready = super().select(0)
            return ready

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """A stdlib event loop with precise timers (see the module docstring)."""
        return asyncio.SelectorEventLoop(_PreciseEpollSelector())

else:  # pragma: no cover - non-Linux fallback

    def new_event_loop() -> asyncio.AbstractEventLoop:
        """The default event loop (no epoll here)."""
        return asyncio.new_event_loop()
