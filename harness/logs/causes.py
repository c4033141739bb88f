"""Error texts -> what happened on the wire, and error classes -> the harness's outcomes.

The texts are torch-logs.md's table ("Error text -> what happened on the wire") and rdzv's
own words for the same causes. Pure data and functions: no I/O.
"""

from __future__ import annotations

import re

__all__ = ["CAUSES", "outcome_of", "outcome_of_message"]

#: Error causes on the wire, each with the texts that say it (torch-logs.md's table, rdzv's
#: own words). Tried in this order; a line may name several.
CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "addr_in_use",
        re.compile(
            r"[Aa]ddress already in use|errno:? ?98\b|EADDRINUSE|already in use by another process"
        ),
    ),
    (
        "refused",
        re.compile(r"[Cc]onnection refused|errno:? ?111\b|ECONNREFUSED|\(connection refused\)"),
    ),
    (
        "no_route",
        re.compile(
            r"[Nn]o route to host|[Nn]etwork is unreachable|errno:? ?11[3]\b|EHOSTUNREACH|"
            r"ENETUNREACH|\bno route\b|host-unreachable"
        ),
    ),
    (
        "dns",
        re.compile(
            r"[Nn]ame or service not known|gai error|"
            r"[Tt]emporary failure in name resolution|host not found|did not resolve|"
            r"does not resolve|EAI_NONAME|EAI_AGAIN|err=-[23]\b"
        ),
    ),
    (
        "not_a_store",
        re.compile(r"not a store|HTTP/1\.[01]|broke the TCPStore protocol|[Ii]nvalid magic"),
    ),
    (
        "silent",
        re.compile(r"silent acceptor|never answers? the handshake|did not answer the handshake"),
    ),
    ("no_reply", re.compile(r"did not answer in time|no reply to [A-Z_]+")),
    (
        "connect_timeout",
        re.compile(
            r"[Cc]onnection timed out|errno:? ?110\b|ETIMEDOUT|client socket has timed out|"
            r"timed out after \S+ while trying to connect|"
            r"no answer to the connection attempt|TCP client failed to connect"
        ),
    ),
    (
        "reset",
        re.compile(
            r"[Cc]onnection reset by peer|errno:? ?104\b|ECONNRESET|[Bb]roken pipe|"
            r"closed the connection \(EOF\)"
        ),
    ),
    ("key_wait", re.compile(r"Timeout waiting for key|[Ww]ait timeout after|Socket Timeout")),
)

_KEY_WAIT = CAUSES[-1][1]

_OUTCOME_BY_CLASS = (
    ("Timeout", "timeout"),
    ("Closed", "closed"),
    ("StateError", "state_error"),
    ("Connection", "connection_error"),
    ("DistNetworkError", "connection_error"),
    ("ConnectionError", "connection_error"),
    ("BrokenPipe", "connection_error"),
)


def outcome_of(cls: str, message: str = "") -> str:
    """The harness outcome class of an error class named in a log."""
    name = cls.rsplit(".", 1)[-1]
    timed_out = re.search(r"timed out|timeout", message, re.IGNORECASE) is not None
    # as the harness classes a node's exception (world/process/reporting.py): a
    # DistStoreError that timed out is a timeout, a DistNetworkError a connection error
    if "store based barrier" in message or (timed_out and name == "DistStoreError"):
        return "timeout"
    if name == "RuntimeError":  # torch before DistNetworkError / DistStoreError (< 2.0)
        if _KEY_WAIT.search(message):
            return "timeout"
        if any(p.search(message) for _, p in CAUSES[:-1]):
            return "connection_error"
    for part, outcome in _OUTCOME_BY_CLASS:
        if part in name:
            return outcome
    if name == "TimeoutError":
        return "timeout"
    return "error"


def outcome_of_message(text: str) -> str:
    """The outcome class of an error message that names no class (rdzv's ``failed`` event)."""
    if "timed out" in text or "did not answer in time" in text:
        return "timeout"
    if "duplicate rank" in text or "world size mismatch" in text:
        return "state_error"
    if "closed" in text and "rendezvous" in text:
        return "closed"
    if any(p.search(text) for _, p in CAUSES[:-1]):
        return "connection_error"
    return "error"
