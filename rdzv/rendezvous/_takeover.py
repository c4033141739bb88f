"""Taking over the claim of a dead predecessor (invariant 6 of :mod:`rdzv.rendezvous._join`).

A node that finds its rank claimed by a process of the same machine that no longer exists
(or by a handler of its own process that shut down or was declared dead) replaces that
claim with compare_set(old identity -> own identity); a live claimant, another machine or
a finished round is a duplicate rank, and a claimant of another world size a mismatch.
"""

from __future__ import annotations

from rdzv.events import WARNING
from rdzv.rendezvous import _round_rules as rules
from rdzv.rendezvous._round_failures import duplicate_message, mismatch_message
from rdzv.rendezvous._round_state import Identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

    from rdzv.rendezvous._join import RoundProtocol

__all__ = ["take_over"]

_MAX_TAKEOVERS: Final = 8  # restarted incarnations racing for one claim


def take_over(p: RoundProtocol, claim_key: str, raw: bytes) -> None:
    """As ``p``'s node: replace the claim ``raw`` of a dead predecessor by this node's
    (invariant 6 of :mod:`rdzv.rendezvous._join`), or reject the round (another world
    size, or a live claimant: a duplicate rank)."""
    done = p.keys.of(p.round, "done")
    for _ in range(_MAX_TAKEOVERS):
        holder = Identity.decode(raw, claim_key)
        if not rules.world_sizes_agree(p.me.world_size, holder.world_size):
            # a node of another world size claims before it rejects the round itself
            message = mismatch_message(p.where, p.me, holder, "claimed its rank")
            p.verdict.reject("world_size_mismatch", message)
        same = p.me.same_machine(holder)
        if not rules.may_take_over(same, same and p.alive(holder.pid, holder.token)):
            break
        if p.call(p.store.check, [done]):  # a finished round is not rejoined
            p.verdict.refuse(p.call(p.store.get, done))
        raw = p.call(p.store.compare_set, claim_key, raw, p.me.raw)
        if raw == p.me.raw:
            p.took_over = holder
            p.event(
                "claim_taken_over",
                WARNING,
                previous=holder.describe(),
                previous_pid=holder.pid,
                host=holder.host,
            )
            return
    holder = Identity.decode(raw, claim_key)
    p.verdict.reject("duplicate_rank", duplicate_message(p.where, holder, p.me))
