"""One proxied TCP connection: two sockets, two links, toxics applied per direction.

Data path. Each socket is an :class:`asyncio.Protocol` (:class:`Side`). A :class:`Link`
carries one direction (``upstream``: client to server, ``downstream``: server to client).
With no active toxic, a received chunk is written straight to the other transport (no
task, no timer, no copy). With active toxics the chunk enters a chain of
:class:`harness.proxy.toxics.Stage` objects in virtual time; each stage's output waits in that
stage's queue until it is due, and one timer per link moves due items on.

Invariants:

1. Bytes leave a link in the order they entered it; chain edits (add, update, remove)
   never lose or reorder bytes: a removed stage hands everything it holds to the next
   stage at once; a restarted one (Toxiproxy restarts a toxic when it is updated or a
   toxic is added after it) hands on the item in flight and takes the rest again.
2. A source is read only while its link holds less than ``HIGH_WATER`` bytes and the
   destination transport is not asking us to pause.
3. A connection is closed exactly once; both sockets go with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random

from harness.proxy.stages import End, Item, Stage, Step, make_stage, roll
from harness.proxy.toxics import Toxic

__all__ = ["HIGH_WATER", "Connection", "Link", "Side"]

HIGH_WATER = 32 * 1024 * 1024
LOW_WATER = HIGH_WATER // 4
Logger = Callable[[int, str, str, str, str], None]  # connection, stream, toxic, action, detail


class Side(asyncio.Protocol):
    """One socket of a proxied connection; feeds the link it is the source of.

    Reading starts paused; the connection resumes it once both links are wired, so no
    byte (e.g. a server's greeting) can arrive before there is a link to carry it.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.out: Link | None = None  # link reading from this socket
        self.into: Link | None = None  # link writing to this socket
        self.connection: Connection | None = None
        self.early_loss = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        link = self.out
        if link is not None:
            if link.fast:
                link.dest_write(data)
            else:
                link.feed(data)

    def eof_received(self) -> bool:
        if self.out is not None:
            self.out.feed(End("eof"))
        return True  # keep the socket open for the other direction

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is None:
            self.early_loss = True
        else:
            self.connection.side_lost(self)

    def pause_writing(self) -> None:
        if self.into is not None:
            self.into.set_dest_paused(True)

    def resume_writing(self) -> None:
        if self.into is not None:
            self.into.set_dest_paused(False)


@dataclass(eq=False)
class _Slot:
    """One toxic's place in a link's chain; ``stage`` is None when its roll said no."""

    toxic: Toxic
    stage: Stage | None = None
    queue: deque[tuple[float, Item, float]] = field(default_factory=deque)  # due, item, arrived
    deadline: float | None = None


class Link:
    """One direction of a connection with its chain of toxics."""

    def __init__(self, conn: Connection, stream: str, source: Side, dest: Side, rng: Random):
        self.conn, self.stream, self.source, self.dest, self.rng = conn, stream, source, dest, rng
        assert dest.transport is not None
        self.dest_transport = dest.transport
        self.dest_write = dest.transport.write
        self.loop = conn.loop
        self.slots: list[_Slot] = []
        self.active: list[_Slot] = []
        self.fast = True
        self.finished = False
        self.held = 0
        self._dest_paused = False
        self._reading = True
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        source.out, dest.into = self, self

    # ----------------------------------------------------------------- chain edits
    def add(self, toxic: Toxic) -> None:
        """Append a toxic to the chain (rolling its toxicity); restarts the one before it."""
        self.slots.append(_Slot(toxic))
        if len(self.slots) > 1:
            self._restart(self.slots[-2], self.slots[-2].toxic)
        self._restart(self.slots[-1], toxic)

    def update(self, toxic: Toxic) -> None:
        """Restart a toxic with new attributes/toxicity (re-rolls; state like limit_data kept)."""
        slot = self._slot(toxic.name)
        self._restart(slot, toxic)

    def remove(self, name: str) -> None:
        """Take a toxic out, handing on what it holds; removing ``timeout`` closes the link."""
        slot = self._slot(name)
        index = self.slots.index(slot)
        self._deactivate(slot)
        del self.slots[index]
        if slot.toxic.type == "timeout":
            self.conn.close(f"toxic {name} removed", toxic=name)
            return
        if index > 0:
            self._restart(self.slots[index - 1], self.slots[index - 1].toxic)

    def _slot(self, name: str) -> _Slot:
        for slot in self.slots:
            if slot.toxic.name == name:
                return slot
        raise KeyError(name)

    def _restart(self, slot: _Slot, toxic: Toxic) -> None:
        """Toxiproxy's stub restart: the item in flight goes on at once, the rest of what
        the toxic held is taken again by the restarted toxic (as of when it first arrived),
        and toxicity is rolled again."""
        previous, now = slot.stage, self.loop.time()
        held = self._detach(slot)
        position = sum(1 for s in self.slots[: self.slots.index(slot)] if s.stage is not None)
        if held:
            self._deliver(position, held.popleft()[1], now)
        slot.toxic = toxic
        applied = roll(toxic.toxicity, self.rng)
        action = "applied" if applied else "skipped"
        self._log(toxic.name, action, f"toxicity {toxic.toxicity:g}, {toxic.type}")
        if applied and not self.finished:
            slot.stage = make_stage(toxic, previous)
            self.active.insert(position, slot)
            self.fast = False
            self._apply(slot, slot.stage.start(now), now)
        for _, item, arrived in held:
            self._deliver(position, item, arrived if slot.stage is not None else now)
        self._settle()

    def _deactivate(self, slot: _Slot) -> None:
        """Take a toxic out of the active chain, passing everything it holds on at once."""
        position = self.active.index(slot) if slot.stage is not None else 0
        now = self.loop.time()
        for _, item, _ in self._detach(slot):
            self._deliver(position, item, now)
        self._settle()

    def _detach(self, slot: _Slot) -> deque[tuple[float, Item, float]]:
        if slot.stage is None:
            return deque()
        self.active.remove(slot)
        held, slot.queue, slot.stage, slot.deadline = slot.queue, deque(), None, None
        self.held -= sum(_size(item) for _, item, _ in held)
        return held

    def _settle(self) -> None:
        if not self.active and not self.finished:
            self.fast = True
        self._pump()

    # ----------------------------------------------------------------- data path
    def feed(self, item: Item) -> None:
        """Take data (or the source's end) read from the source socket."""
        if self.finished:
            return
        if self.fast:
            self._sink(item)
            return
        self._deliver(0, item, self.loop.time())
        self._pump()
        self._update_reading()

    def _deliver(self, index: int, item: Item, arrive: float) -> None:
        if index >= len(self.active):
            self._sink(item)
            return
        slot = self.active[index]
        stage = slot.stage
        assert stage is not None
        if slot.deadline is not None and slot.deadline <= arrive:
            deadline, slot.deadline = slot.deadline, None
            self._apply(slot, stage.expire(deadline), deadline)
        self._apply(slot, stage.push(item, arrive, self.rng), arrive)

    def _apply(self, slot: _Slot, step: Step, arrived: float) -> None:
        for due, item in step.out:
            self.held += _size(item)
            slot.queue.append((due, item, arrived))
        slot.deadline = step.deadline
        if step.note is not None:
            self._log(slot.toxic.name, "acted", step.note)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        self._pump()

    def _pump(self) -> None:
        if self.finished:
            return
        now = self.loop.time()
        index = 0
        while index < len(self.active):
            slot = self.active[index]
            while slot.queue and slot.queue[0][0] <= now and not self.finished:
                due, item, _ = slot.queue.popleft()
                self.held -= _size(item)
                self._deliver(index + 1, item, due)
            if slot.deadline is not None and slot.deadline <= now and slot.stage is not None:
                deadline, slot.deadline = slot.deadline, None
                self._apply(slot, slot.stage.expire(deadline), deadline)
                continue  # drain what expiring emitted
            if self.finished:
                return
            index += 1
        self._schedule()
        self._update_reading()

    def _schedule(self) -> None:
        due = math.inf
        for slot in self.active:
            if slot.queue:
                due = min(due, slot.queue[0][0])
            if slot.deadline is not None:
                due = min(due, slot.deadline)
        if due < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = due
            self._timer = self.loop.call_at(due, self._on_timer)

    def _sink(self, item: Item) -> None:
        if self.finished:
            return
        if isinstance(item, bytes):
            if item and not self.dest_transport.is_closing():  # closing: side_lost follows
                self.dest_write(item)
            return
        self.finish()
        if item.kind == "eof":
            self.conn.half_close(self)
        else:
            toxic = item.toxic or ""
            self.conn.close(f"{item.kind} by toxic {toxic}", toxic=toxic, rst=item.kind == "reset")

    def finish(self) -> None:
        """Stop this link: no more input is taken, held data is dropped, timers cancelled."""
        self.finished = True
        self.fast = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ----------------------------------------------------------------- flow control
    def set_dest_paused(self, paused: bool) -> None:
        """Called when the destination transport's buffer crosses its water marks."""
        self._dest_paused = paused
        self._update_reading()

    def _update_reading(self) -> None:
        want = not self._dest_paused and self.held < (
            LOW_WATER if not self._reading else HIGH_WATER
        )
        transport = self.source.transport
        if want == self._reading or transport is None or self.conn.closed:
            return
        self._reading = want
        if want:
            transport.resume_reading()
        else:
            transport.pause_reading()

    def _log(self, toxic: str, action: str, detail: str) -> None:
        self.conn.log(self.conn.number, self.stream, toxic, action, detail)


def _size(item: Item) -> int:
    return len(item) if isinstance(item, bytes) else 0


class Connection:
    """A client socket, its upstream socket and the two links between them."""

    def __init__(
        self,
        number: int,
        client: Side,
        upstream: Side,
        chain: dict[str, list[Toxic]],
        seed: str,
        log: Logger,
        on_closed: Callable[[Connection], None],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.number, self.client, self.upstream = number, client, upstream
        self.log, self._on_closed = log, on_closed
        self.closed = False
        client.connection = upstream.connection = self
        self.links = {
            "upstream": Link(self, "upstream", client, upstream, Random(f"{seed}/upstream")),
            "downstream": Link(self, "downstream", upstream, client, Random(f"{seed}/downstream")),
        }
        for stream, link in self.links.items():
            for toxic in chain[stream]:
                link.slots.append(_Slot(toxic))
                link._restart(link.slots[-1], toxic)

    def half_close(self, link: Link) -> None:
        """The link's source ended and everything before it was delivered: pass the FIN on."""
        transport = link.dest.transport
        if transport is not None and transport.can_write_eof() and not transport.is_closing():
            try:
                transport.write_eof()
            except OSError as exc:  # the peer is already gone
                self.close(f"passing on the end failed: {exc}", drop=True)
                return
        if all(other.finished for other in self.links.values()):
            self.close("both directions ended")

    def side_lost(self, side: Side) -> None:
        """One socket is gone: let its readable data finish, drop what was going to it."""
        if self.closed:
            return
        assert side.into is not None and side.out is not None
        side.into.finish()
        if side.out.finished:
            self.close("socket closed")
        else:
            side.out.feed(End("eof"))

    def close(self, reason: str, *, toxic: str = "", rst: bool = False, drop: bool = False) -> None:
        """Close both sockets once: FIN after flushing, or RST (``rst``), or at once (``drop``)."""
        if self.closed:
            return
        self.closed = True
        for link in self.links.values():
            link.finish()
        for side in (self.client, self.upstream):
            transport = side.transport
            if transport is None:
                continue
            if rst:
                sock = transport.get_extra_info("socket")
                with contextlib.suppress(OSError, AttributeError):  # gone: nothing to reset
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            if rst or drop:
                transport.abort()
            else:
                transport.close()
        self.log(self.number, "", toxic, "reset" if rst else "closed", reason)
        self._on_closed(self)
