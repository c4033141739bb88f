"""Rate-limited log lines for the connections the store server drops (sans-IO).

A flood of hostile connections must not become a flood of log lines (one attack used to
write one WARNING per dropped connection: 7,800 lines). :class:`DropLog` decides which
lines to write; the server writes them and arms a timer for :attr:`DropLog.summary_due`.

Invariants:

1. Every drop is counted exactly once: either in a line of its own, or in the next summary.
   The counts of the summaries plus the lines of their own add up to :attr:`DropLog.total`.
2. At most ``full_lines`` drops get a line of their own per burst; a burst ends only after
   ``interval`` seconds without any drop. Drops beyond that are summarised, one line per
   ``interval`` at most (``"dropped N more store connections in the last 10 s ..."``).
3. Memory is bounded however many peers attack: reasons come from a fixed set chosen by
   the caller, and at most :data:`MAX_PEERS` distinct peer hosts are remembered per summary.

Nothing here reads a clock: the caller passes ``now`` (any monotonic clock).
"""

from __future__ import annotations

from collections import Counter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "FULL_LINES",
    "INCOMPLETE",
    "MAX_PEERS",
    "REJECTED",
    "SUMMARY_INTERVAL",
    "UNDECODABLE",
    "DropLog",
]

#: The server's reasons for dropping a connection (the fixed set of invariant 3).
UNDECODABLE: Final = "undecodable request"
#: (see :data:`UNDECODABLE`)
REJECTED: Final = "rejected request"
#: (see :data:`UNDECODABLE`)
INCOMPLETE: Final = "request left incomplete"

#: Drops logged in full at the start of a burst.
FULL_LINES: Final = 5
#: Seconds covered by one summary line; also the quiet time that ends a burst.
SUMMARY_INTERVAL: Final = 10.0
#: Distinct peer hosts remembered per summary (more are reported as "more than ...").
MAX_PEERS: Final = 4096


def _tally(reasons: Counter[str]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in reasons.most_common())


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class DropLog:
    """Which lines to log for dropped connections (see the module doc).

    Args:
        full_lines: drops logged in full at the start of a burst.
        interval: seconds per summary, and the quiet time that ends a burst.
    """

    def __init__(self, full_lines: int = FULL_LINES, interval: float = SUMMARY_INTERVAL) -> None:
        if full_lines < 0 or not interval > 0:
            raise ValueError(
                f"full_lines must be >= 0 and interval > 0, got {full_lines!r} and {interval!r}"
            )
        self.full_lines = full_lines
        self.interval = interval
        self.total = 0
        self.logged = 0
        self._reasons_all: Counter[str] = Counter()
        self._budget = full_lines
        self._last_drop: float | None = None
        self._since: float | None = None
        self._reasons: Counter[str] = Counter()
        self._peers: set[str] = set()

    def record(self, now: float, peer: str, host: str, reason: str, detail: str) -> str | None:
        """Count one dropped connection.

        Args:
            now: the caller's clock.
            peer: the peer as shown in a full line (``"10.0.0.7:51234"``).
            host: the peer's host, counted in summaries (ports differ per connection).
            reason: a short category from a fixed set (``"undecodable request"``).
            detail: what the peer did, for the full line.

        Returns:
            The line to log now, or None when the drop is only counted; then log
            :meth:`summary` at :attr:`summary_due`.
        """
        if self._last_drop is None or now - self._last_drop >= self.interval:
            self._budget = self.full_lines  # a quiet interval ended the last burst
        self._last_drop = now
        self.total += 1
        self._reasons_all[reason] += 1
        if self._budget > 0:
            self._budget -= 1
            self.logged += 1
            line = f"dropping store connection from {peer}: {detail}"
            if self._budget == 0:
                line += f" (further drops are summarised every {self.interval:g} s)"
            return line
        if self._since is None:
            self._since = now
        self._reasons[reason] += 1
        if len(self._peers) < MAX_PEERS:
            self._peers.add(host)
        return None

    @property
    def summary_due(self) -> float | None:
        """When the pending summary should be logged (None: nothing is pending)."""
        return None if self._since is None else self._since + self.interval

    def summary(self, now: float) -> str | None:
        """The line summarising the drops counted since the last summary; resets them.

        Returns:
            The line, or None when no drop is pending.
        """
        if self._since is None:
            return None
        count = sum(self._reasons.values())
        peers = len(self._peers)
        shown = f"more than {MAX_PEERS} peers" if peers >= MAX_PEERS else _plural(peers, "peer")
        line = (
            f"dropped {count} more store {'connection' if count == 1 else 'connections'} "
            f"in the last {max(now - self._since, 0.0):.0f} s (not logged one by one): "
            f"{_tally(self._reasons)}; from {shown}"
        )
        self._since = None
        self._reasons.clear()
        self._peers.clear()
        return line

    def close(self, now: float) -> list[str]:
        """The lines to log when the server closes: the pending summary, then the total of
        every drop since the start when some were summarised (nothing otherwise: every drop
        already had a line of its own)."""
        lines = [line for line in (self.summary(now),) if line is not None]
        if self.total > self.logged:
            lines.append(
                f"dropped {_plural(self.total, 'store connection')} in all while serving "
                f"({self.logged} logged one by one, {self.total - self.logged} summarised): "
                f"{_tally(self._reasons_all)}"
            )
        return lines
