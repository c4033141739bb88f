"""Rendezvous state in the store: key names, node identities, verdicts, a confirmation's
deadline (no network I/O).

Keys (all under ``__rdzv__/<run_id, percent-quoted>/``, so runs never see each other's keys
and a user's ``PrefixStore(run_id)`` keys never collide with them)::

    closed                 who closed the rendezvous (JSON); set by set_closed()
    round/<k>/first        identity of the first node to join round k (holds its world size)
    round/<k>/claim/<r>    identity of the node that claimed rank r (compare_set: one winner)
    round/<k>/arbiter      identity of the hosting node, set before its own confirmation when
                           it decides completion (rdzv.rendezvous._join, invariant 10)
    round/<k>/count        add(1) by every claimant (a takeover adds again, so it may exceed
                           N); a node that sees it reach N completes the round once every
                           rank has confirmed, unless the hosting node arbitrates
    round/<k>/confirmed/<r>  "<seconds to its deadline> <identity>" of rank r's claimant, set
                           right after its add(count): "this rank is counted" (the seconds:
                           rdzv.rendezvous._join, invariant 11)
    round/<k>/joined       "r," appended by rank r right after its confirmation: what a timeout
                           diagnosis reads (one GET) and reports as joined
    round/<k>/diagnosing   add(1) by every member whose deadline passed; the one that got 1
                           names the missing ranks (rdzv.rendezvous._join, invariant 11)
    round/<k>/done         the round's single verdict (compare_set: the first writer wins):
                           complete | aborted (reason, message) | closed
    round/<k>/ack/<r>      set by rank r once it read a complete verdict; the hosting node
                           waits for all of them before returning (the exit barrier)
    round/<k>/exit/<r>     set by rank r in shutdown(); the hosting node waits for every
                           other rank's before it stops the store (see rdzv.rendezvous._exit.leave)
"""

from __future__ import annotations

import json
import math
import os
import socket
from json.encoder import encode_basestring_ascii

from rdzv.errors import RendezvousStateError
from rdzv.rendezvous._liveness import local_machine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Final

__all__ = [
    "Identity",
    "RoundKeys",
    "closed_record",
    "confirmation",
    "confirmation_due",
    "decode_verdict",
    "encode_verdict",
    "format_ranks",
    "is_complete",
    "name_ranks",
]


def _msg(*parts: str) -> str:
    return " ".join(parts)


def _encode_identity(me: Identity) -> bytes:
    """``json.dumps(me.as_dict(), sort_keys=True, separators=(",", ":"))``, encoded: by hand
    when the fields have the types this version gives them (the same bytes, without
    building a ``JSONEncoder``: a cold process pays most of a join's JSON for it)."""
    if not (
        type(me.host) is str
        and type(me.machine) is str
        and type(me.token) is str
        and type(me.pid) is int
        and type(me.rank) is int
        and type(me.world_size) is int
    ):
        return json.dumps(me.as_dict(), sort_keys=True, separators=(",", ":")).encode()
    quote = encode_basestring_ascii
    host, machine, token = quote(me.host), quote(me.machine), quote(me.token)
    return (
        f'{{"host":{host},"machine":{machine},"pid":{me.pid},"rank":{me.rank},'
        f'"token":{token},"world_size":{me.world_size}}}'
    ).encode()


class Identity:
    """Who claims a rank: enough to tell two claimants apart, to name them, and to tell
    whether a claimant is a dead predecessor on this machine (see
    :mod:`rdzv.rendezvous._liveness`).

    Immutable by convention, compared and hashed by its fields. A plain slotted class rather
    than a frozen dataclass: ``dataclasses`` (with ``inspect``) is most of a millisecond-scale
    import the class line would otherwise pay.
    """

    __slots__ = ("_raw", "host", "machine", "pid", "rank", "token", "world_size")

    def __init__(
        self, host: str, pid: int, rank: int, world_size: int, token: str, machine: str = ""
    ) -> None:
        self.host = host
        self.pid = pid
        self.rank = rank
        self.world_size = world_size
        self.token = token
        self.machine = machine
        self._raw: bytes | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (what ``Identity(**d)`` takes back)."""
        return {
            "host": self.host,
            "pid": self.pid,
            "rank": self.rank,
            "world_size": self.world_size,
            "token": self.token,
            "machine": self.machine,
        }

    def _key(self) -> tuple[str, int, int, int, str, str]:
        return (self.host, self.pid, self.rank, self.world_size, self.token, self.machine)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Identity):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.as_dict().items())
        return f"Identity({shown})"

    @classmethod
    def local(cls, rank: int, world_size: int) -> Identity:
        """This process's identity; the token tells two handlers in one process apart."""
        return cls(
            socket.gethostname(),
            os.getpid(),
            rank,
            world_size,
            os.urandom(8).hex(),
            local_machine(),
        )

    def same_machine(self, other: Identity) -> bool:
        """Whether ``other`` was recorded on this identity's host, kernel and pid namespace."""
        return (self.host, self.machine) == (other.host, other.machine)

    def encode(self) -> bytes:
        """The stored form (computed once: claims compare it byte for byte)."""
        return self.raw

    @property
    def raw(self) -> bytes:
        """The stored form, computed on first use."""
        if self._raw is None:
            self._raw = _encode_identity(self)
        return self._raw

    @classmethod
    def decode(cls, raw: bytes, key: str) -> Identity:
        """Parse a stored identity.

        Raises:
            RendezvousStateError: ``raw`` is not an identity (the key was written by others).
        """
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError) as exc:
            raise RendezvousStateError(
                _msg(
                    f"the store key {key!r} holds {raw[:80]!r}, not a rendezvous identity;",
                    "another program writes under rdzv's reserved key prefix.",
                )
            ) from exc

    def describe(self) -> str:
        return f"rank {self.rank} ({self.host} pid {self.pid})"

    @staticmethod
    def of_world_size(raw: bytes, world_size: int) -> bool:
        """Whether ``raw`` is an identity of ``world_size`` nodes as :attr:`raw` encodes it
        (compact, keys sorted: ``world_size`` comes last), told without parsing it; False
        means "parse it to know"."""
        return raw.endswith(b',"world_size":%d}' % world_size)


#: What ``urllib.parse.quote(text, safe="")`` leaves as it is.
_UNQUOTED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def _quoted(run_id: str) -> str:
    """``run_id`` percent-quoted (``/`` included): as is when it needs no quoting, which
    spares the import of ``urllib.parse`` for the usual run ids (``job-1``, ``a1b2c3``)."""
    if _UNQUOTED.issuperset(run_id):
        return run_id
    from urllib.parse import quote  # lazy: run ids with other characters only

    return quote(run_id, safe="")


class RoundKeys:
    """Key names of one run (see the module docstring)."""

    def __init__(self, run_id: str) -> None:
        self.prefix = f"__rdzv__/{_quoted(run_id)}"
        self.closed = f"{self.prefix}/closed"

    def of(self, round_index: int, name: str) -> str:
        return f"{self.prefix}/round/{round_index}/{name}"

    def claim(self, round_index: int, rank: int) -> str:
        return self.of(round_index, f"claim/{rank}")

    def confirmed(self, round_index: int, rank: int) -> str:
        return self.of(round_index, f"confirmed/{rank}")


def format_ranks(ranks: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``; ``[]`` -> ``"none"``."""
    if not ranks:
        return "none"
    spans: list[str] = []
    start = prev = ranks[0]
    for rank in [*ranks[1:], None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ", ".join(spans)


def name_ranks(ranks: list[int]) -> str:
    """``[2]`` -> ``"rank 2"``; ``[1, 2, 5]`` -> ``"ranks 1-2, 5"``; ``[]`` -> ``"no rank"``."""
    if not ranks:
        return "no rank"
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {format_ranks(ranks)}"


def decode_verdict(raw: bytes, key: str) -> dict[str, Any]:
    """Parse a verdict or a closed record stored at ``key``.

    Raises:
        RendezvousStateError: ``raw`` is not one (another program wrote the key).
    """
    try:
        value = json.loads(raw)
        Identity(**value["by"])
        status = value["status"]
    except (ValueError, TypeError, KeyError) as exc:
        raise RendezvousStateError(
            _msg(
                f"the store key {key!r} holds {raw[:80]!r}, not a rendezvous verdict;",
                "another program writes under rdzv's reserved key prefix.",
            )
        ) from exc
    if status not in ("complete", "aborted", "closed"):
        raise RendezvousStateError(f"the store key {key!r} holds an unknown status {status!r}")
    return dict(value)


#: How a complete verdict as :func:`encode_verdict` writes it begins and ends (keys sorted:
#: ``at``, ``by``, ``status``; only a failed verdict has more).
_COMPLETE: Final = (b'{"at": ', b', "status": "complete"}')


def is_complete(raw: bytes) -> bool:
    """Whether ``raw`` is a complete verdict as :func:`encode_verdict` writes it, told by its
    first and last bytes (every member reads one per round; parsing it costs a cold process
    more than the rest of reading it); False means "decode it to know"."""
    return raw.startswith(_COMPLETE[0]) and raw.endswith(_COMPLETE[1])


def encode_verdict(verdict: dict[str, Any]) -> bytes:
    """The stored form of a verdict or a closed record (what :func:`decode_verdict` reads)."""
    return json.dumps(verdict, sort_keys=True).encode()


def closed_record(me: Identity, at: float) -> bytes:
    """The JSON written to ``closed`` and to an open round's ``done`` by ``set_closed``."""
    return encode_verdict({"status": "closed", "by": me.as_dict(), "at": at})


def confirmation(left: float, deadline: float | None, me: Identity) -> bytes:
    """The value of ``me``'s confirmation (what :func:`confirmation_due` reads): the
    seconds it has ``left``, its ``deadline`` on the machine's monotonic clock when its
    deadline is on that clock (else None: left out), and its identity."""
    at = "" if deadline is None else f" {deadline:.6f}"
    return f"{left:.3f}{at} ".encode() + me.raw


def confirmation_due(
    value: bytes | None, now: float, me: Identity, head: bytes, same_clock: bool
) -> float | None:
    """The join deadline, on the watching node's clock (which reads ``now``), of the member
    whose confirmation is ``value`` (``b"29.812 81234.567890 {identity}"``: the seconds it
    had left when it sent it, its deadline on its machine's monotonic clock -- the same clock
    as the watcher's when its identity says it runs on the machine, kernel and pid namespace
    of ``me`` (whose identity starts with ``head``, its host and machine), and the watcher's
    clock is ``time.monotonic`` (``same_clock``) -- and its identity); None for anything
    else (invariant 11 of :mod:`rdzv.rendezvous._join`).

    From another machine the deadline is the seconds left counted from now: never
    earlier than the member's own, later by the time the confirmation took to arrive.
    """
    parts = (value or b"").split(b" ", 2)
    try:
        left = float(parts[0])
    except ValueError:
        return None
    if not math.isfinite(left):
        return None
    due = now + max(left, 0.0)
    if len(parts) == 3 and same_clock and me.machine:
        try:
            at = float(parts[1])
            # an identity as this version writes it starts with its host and machine
            same = parts[2].startswith(head) or (
                Identity.decode(parts[2], "confirmed").same_machine(me)
            )
        except (ValueError, RendezvousStateError):
            return due
        if same and math.isfinite(at):
            return min(due, at)
    return due
