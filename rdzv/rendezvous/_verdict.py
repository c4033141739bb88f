"""One node's part in the round's verdict: proposing it, reading it and acknowledging it.

A round has one verdict, on its ``done`` key (invariant 1 of :mod:`rdzv.rendezvous._join`);
:class:`RoundVerdict` is how a node of the round writes one (``compare_set("", ...)``: the
first proposal wins), acts on the one that won (returns on ``complete``, raises what any other
stands for, invariant 3), and acknowledges that it read it, which the hosting node's exit
barriers wait for (:mod:`rdzv.rendezvous._exit`). :class:`~rdzv.rendezvous._join.RoundProtocol`
holds one (``verdict``) and decides when to propose what; the store calls go through the
round's :class:`~rdzv.rendezvous._round_io.RoundIO` (bounded, translated, reported).
"""

from __future__ import annotations

import contextlib

from rdzv.errors import RendezvousClosedError, RendezvousError, RendezvousStateError
from rdzv.rendezvous import _round_rules as rules
from rdzv.rendezvous._round_failures import closed_message, stale_message, verdict_error
from rdzv.rendezvous._round_io import RoundIO
from rdzv.rendezvous._round_state import Identity, decode_verdict, encode_verdict, is_complete

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["RoundVerdict"]


class RoundVerdict:
    """The verdict of ``io``'s round, as this node writes, reads and acknowledges it.

    Attributes:
        reason: the reason of the failed verdict this node raised (``member_lost``, ...);
            None until it raised one.
    """

    def __init__(self, io: RoundIO) -> None:
        self.io = io
        self.done = io.keys.of(io.round, "done")
        self.reason: str | None = None

    def reject(self, reason: str, message: str, claimed: bool = False) -> NoReturn:
        """Abort the round from a node that is not (and will not be) a member of it. One
        that ``claimed`` its rank (in the write that read ``first``) acknowledges the
        verdict like a member: the hosting node's linger waits for every claimant's ack."""
        io = self.io
        encoded = encode_verdict(io.aborted(reason, message))
        raw = io.call(io.store.compare_set, self.done, "", encoded)
        if claimed:
            with contextlib.suppress(RendezvousError):  # the verdict matters, not the ack
                self.acknowledge()
        self.refuse(raw)

    def refuse(self, raw: bytes) -> NoReturn:
        """As a non-member: raise what the round's verdict ``raw`` means for this node."""
        io = self.io
        status = decode_verdict(raw, self.done)["status"]
        if status == "complete":
            closed = bool(io.call(io.store.check, [io.keys.closed]))
            if rules.refusal(status, closed) == "closed":
                self.raise_closed(io.call(io.store.get, io.keys.closed))
            io.fail(RendezvousStateError(stale_message(io.where, io.me)))
        self.raise_verdict(raw)

    def settle(self, proposal: dict[str, Any]) -> None:
        """As a member: propose a verdict; return if the winning verdict is complete."""
        io = self.io
        self.act_on(io.call(io.store.compare_set, self.done, "", encode_verdict(proposal)))

    def act_on(self, raw: bytes) -> None:
        """As a member: return if ``raw`` is a complete verdict, else raise what it says.

        Either way the member first acknowledges that it read the verdict: the hosting node
        keeps the store up until its members have (see
        :meth:`~rdzv.rendezvous._join.RoundProtocol.wait_for_readers`,
        :meth:`~rdzv.rendezvous._join.RoundProtocol.linger`), so a verdict that ends the
        round reaches every member.
        """
        io = self.io
        io.read_verdict = True
        if not is_complete(raw) and not rules.is_success(decode_verdict(raw, self.done)):
            if not io.connection_lost:  # else read (and acknowledged) over a fresh one
                with contextlib.suppress(RendezvousError):  # the verdict matters, not the ack
                    self.acknowledge()
            self.raise_verdict(raw)
        self.acknowledge()
        io.event("complete", world_size=io.me.world_size)

    def raise_verdict(self, raw: bytes) -> NoReturn:
        """Raise the error an aborted or closed verdict stands for."""
        verdict = decode_verdict(raw, self.done)
        self.reason = str(verdict.get("reason", verdict["status"]))
        if verdict["status"] == "closed":
            self.raise_closed(raw)
        self.io.fail(verdict_error(verdict, self.io.me, self.io.waited()))

    def acknowledge(self) -> None:
        """Say that this node read the verdict (its ``ack/<rank>`` key)."""
        io = self.io
        io.call(io.store.set, io.keys.of(io.round, f"ack/{io.me.rank}"), b"1")

    def raise_closed(self, raw: bytes) -> NoReturn:
        """Raise that the rendezvous was closed, naming who closed it (from ``raw``)."""
        io = self.io
        by = Identity(**decode_verdict(raw, io.keys.closed)["by"])
        io.fail(RendezvousClosedError(closed_message(io.cfg, by, io.me, io.round)))
