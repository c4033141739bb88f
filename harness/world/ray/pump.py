"""What brings the Ray world's node messages home: one thread, a long poll per actor.

Every watched group's actor always has one :meth:`~harness.world.ray.actors.NodeGroup.drain`
call open; the thread waits on all of them at once (``ray.wait``), hands each batch to the
world and opens the next call, until the actor says its nodes have all ended. An actor that
dies while a call is open (its host failed, or the world killed it) ends its watch: the
world hears of it through ``lost`` unless it killed the actor itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import ray

from harness.world.messages import Message
from harness.world.ray.groups import Group

__all__ = ["Pump"]

#: How long one wait for any actor's messages lasts before new watches are looked at.
_TICK: Final = 0.1


class Pump:
    """Args: ``deliver(group, items)`` for each batch; ``lost(group, why)`` when an actor
    the world did not kill died."""

    def __init__(
        self,
        deliver: Callable[[Group, list[tuple[int, Message]]], None],
        lost: Callable[[Group, str], None],
    ) -> None:
        self._deliver = deliver
        self._lost = lost
        self._cond = threading.Condition()
        self._watched: list[tuple[Group, Any]] = []  # (group, the actor watched)
        self._stopping = False
        self._thread: threading.Thread | None = None

    def watch(self, group: Group) -> None:
        """Start bringing home the messages of ``group``'s current actor."""
        with self._cond:
            self._watched.append((group, group.actor))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="harness-ray-pump", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def wait_ended(self, groups: Sequence[Group], grace: float) -> list[Group]:
        """Wait up to ``grace`` seconds for ``groups`` to end; the ones that did."""
        deadline = time.monotonic() + grace
        with self._cond:
            while not all(g.ended for g in groups):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return [g for g in groups if g.ended]

    def stop(self) -> None:
        """End the thread (the actors are killed by then: their calls fail at once)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)

    def _run(self) -> None:
        open_calls: dict[Any, tuple[Group, Any]] = {}
        while True:
            with self._cond:
                for group, actor in self._watched:
                    open_calls[actor.drain.remote()] = (group, actor)
                self._watched = []
                if self._stopping and not open_calls:
                    return
                if not open_calls:
                    self._cond.wait(_TICK)
                    continue
            ready, _ = ray.wait(list(open_calls), num_returns=1, timeout=_TICK)
            for ref in ready:
                group, actor = open_calls.pop(ref)
                again = self._take(group, actor, ref)
                if again and not self._stopping:
                    open_calls[actor.drain.remote()] = (group, actor)
            if self._stopping:
                for ref in list(open_calls):
                    group, actor = open_calls[ref]
                    if group.dead or group.actor is not actor:
                        del open_calls[ref]  # killed: its call fails or never returns

    def _take(self, group: Group, actor: Any, ref: Any) -> bool:
        """Deliver one batch; whether to ask the actor again."""
        try:
            items, ended = ray.get(ref)
        except Exception as exc:  # the actor died
            if not group.dead and group.actor is actor:
                group.dead = True
                self._lost(group, f"{type(exc).__name__}: {exc}")
            return False
        if items:
            self._deliver(group, items)
        if ended:
            with self._cond:
                if group.actor is actor:
                    group.ended = True
                self._cond.notify_all()
            return False
        return True
