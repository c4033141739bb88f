"""What a node says, coming back to the harness: small typed messages, made on the node.

Each message is a frozen dataclass with slots: it pickles with the standard pickle (a
node's pipe, :class:`~harness.world.process.reporting.PipeReporter`), with dill
(``multiprocess``) and with Ray's cloudpickle, and is read by name wherever it arrives --
never by position, never by key. In the order a node sends them:

=========== ===========================================================================
:class:`Ready`   up, imports done, channel open, handler built: waiting at the start gate
                 (which thread waits there, so the runner can see it asleep)
:class:`Started` released: ``t`` is when it saw the release; where the world placed it
:class:`Event`   a stage on the way: rdzv's structured log events (``connect_attempt``,
                 ``joined``, ...) and the harness's own (``returned``)
:class:`Outcome` how its rendezvous ended: status, rank, world size, the error, when it
                 began, whether its shutdown failed (once per start)
:class:`Exit`    made by the world, not the node: it ended without an outcome
=========== ===========================================================================

Every message names its ``node`` and carries ``t``, on the monotonic clock of the machine
that made it; a world whose nodes run on other hosts moves every time of a message onto the
harness's clock with :func:`shifted` before handing it on.

**Parts.** Every message has a ``part``: which part of the node said it. Today a node is one
part, :data:`NODE`. A node that is a job (a torchrun agent with its workers) has parts --
``"agent"``, ``"worker 0"``, ``"worker 1"``, ... -- each with stages of its own and an
outcome of its own; it still ends with one outcome of part :data:`NODE` (the node's, which
ends the incarnation: :func:`ends`), so worlds and the start-up wait need no change. The
runner takes the node part's outcome as the node's and keeps its parts' outcomes beside it
(:mod:`harness.run.job_checks` judges them); a part's events are stages faults can fire on.

Imports: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Final

__all__ = [
    "NODE",
    "Event",
    "Exit",
    "Message",
    "Outcome",
    "Ready",
    "Started",
    "ends",
    "shifted",
]

#: The part of a node that is the whole node (every message's default).
NODE: Final = "node"


@dataclass(frozen=True, slots=True)
class Ready:
    """The node is up and waits at the start gate.

    Attributes:
        pid: the process it runs in.
        tid: the native id of the thread that waits at the gate.
    """

    node: int
    t: float
    pid: int
    tid: int
    part: str = NODE


@dataclass(frozen=True, slots=True)
class Started:
    """The node saw the release (``t``) and begins its rendezvous now.

    Attributes:
        pid: the process it runs in.
        placement: how the world runs it, for the report (see
            :attr:`~harness.world.process.node.Hosting.placement`).
    """

    node: int
    t: float
    pid: int
    placement: str
    part: str = NODE


@dataclass(frozen=True, slots=True)
class Event:
    """A stage the node reached: ``name`` and what it said about it (``fields``: plain
    values, as the rendezvous logged them)."""

    node: int
    t: float
    name: str
    fields: dict[str, Any] = field(default_factory=dict)
    part: str = NODE


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one start of the node ended (``t``: when it said so).

    Attributes:
        status: ``ok`` or how it failed (``timeout``, ``connection_error``, ``closed``,
            ``state_error``, ``error``; see :func:`~harness.world.process.reporting.classify`).
        started: when it saw the release and began (None: it never did).
        pid: the process it ran in.
        placement: how the world ran it, for the report.
        rank: the rank its rendezvous gave it (None: it never returned).
        world_size: the world size its rendezvous gave it.
        run_id: the run id it joined.
        error_class: the qualified class of the error it failed with.
        message: what the error said (prefixed when it came after the rendezvous
            returned).
        shared_store_ok: every rank's key was in the store it got (None: never checked).
        seen_ranks: ranks whose key it found in that store (None: never looked, or
            ``seen_all_but`` says).
        seen_all_but: rank 0's word, on another rank: rank 0 found the key of every rank
            below ``world_size`` but these (None: no word; kept in this form so that no
            node sends the world's list of ranks).
        shutdown_error: ``Class: text`` when the handler's ``shutdown()`` raised.
        maxrss_kib: the peak resident memory of its process.
        exitcode: a job part's exit code (a worker's; the agent's 0 or 1).
        result: a job worker's all-reduce result.
        restarts: a job agent's restarts (a worker's: the attempt it ran in).
        membership_restarts: how many of a job agent's restarts were for a membership
            change (not counted against ``--max-restarts``).
    """

    node: int
    t: float
    status: str
    started: float | None = None
    pid: int | None = None
    placement: str | None = None
    rank: int | None = None
    world_size: int | None = None
    run_id: str | None = None
    error_class: str | None = None
    message: str | None = None
    shared_store_ok: bool | None = None
    seen_ranks: list[int] | None = None
    seen_all_but: list[int] | None = None
    shutdown_error: str | None = None
    maxrss_kib: int | None = None
    exitcode: int | None = None
    result: float | None = None
    restarts: int | None = None
    membership_restarts: int | None = None
    part: str = NODE

    @property
    def elapsed(self) -> float | None:
        """From when it began to when it said how it ended (None: it never began)."""
        return None if self.started is None else self.t - self.started


@dataclass(frozen=True, slots=True)
class Exit:
    """The node ended without an outcome (made by the world: its process or actor died).

    Attributes:
        why: what ended it, in a sentence.
        exitcode: its process's exit code, where there is one.
    """

    node: int
    t: float
    why: str
    exitcode: int | None = None
    part: str = NODE


#: Everything that comes back from a node (the ``on_message`` callback's argument).
Message = Ready | Started | Event | Outcome | Exit


def shifted(message: Message, by: float) -> Message:
    """``message`` with every time it carries moved ``by`` seconds (from another host's
    monotonic clock onto this one's)."""
    if isinstance(message, Outcome) and message.started is not None:
        return replace(message, t=message.t + by, started=message.started + by)
    return replace(message, t=message.t + by)


def ends(message: Message) -> bool:
    """Whether ``message`` is the last one of its node's start: the outcome (or exit) of
    the whole node, not of one of its parts."""
    return isinstance(message, Outcome | Exit) and message.part == NODE
