"""Sans-IO readers: what a classified line says, as :class:`Observation` s.

One line may say several things (a connect error names its cause and its endpoint); a
structure may span lines (the ``ChildFailedError`` box, a harness report's ``node N
events:`` panel), so :class:`Reader` keeps the little state those need and is fed lines in
order. The readers know the texts of ../shared/reference/torch-logs.md (torch's human
lines, the error-file JSON, the box, torch's ``Event`` / ``RdzvEvent`` JSON), rdzv's own
events (``name key=value ...`` or ``name: message``) and the harness's reports.

Observation kinds (``data`` keys in brackets):
``launch`` (min_nodes, max_nodes, nproc, backend, endpoint, run_id, max_restarts,
join_timeout), ``store_host`` (pid), ``rank`` (rank), ``world`` (size), ``workers``
(world_size), ``joined``, ``complete``, ``connected``, ``connect_attempt``, ``error``
(cls, outcome, message), ``cause`` (cause), ``missing`` (ranks), ``join_timeout``
(seconds), ``barrier`` (world_size, worker_count, timeout), ``key_wait`` (key), ``died``
(signal, exitcode, rank), ``restart`` (left), ``outcome`` (status, message), ``endpoint``
(host, port), ``mismatch`` (kind), ``started``, ``stage`` (stage and its fields: a job node's).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from harness.logs.causes import CAUSES, outcome_of, outcome_of_message
from harness.logs.lines import Line

__all__ = ["JOB_STAGES", "Observation", "Reader"]

_ERROR_LINE = re.compile(
    r"(?:^|\s)(?P<cls>(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception))(?::(?: (?P<msg>.*))?)?$"
)
_RDZV_EVENT = re.compile(r"(?P<name>[a-z][a-z_]+)(?:: (?P<msg>.+)| (?P<fields>[a-z_]+=.*))$")
_FIELD = re.compile(r"([a-z_]+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\[[^\]]*\]|\{[^}]*\}|\S+)")
_TORCH_JOINED = re.compile(
    r"has joined round (?P<round>\d+) of the rendezvous '[^']*' as rank (?P<rank>\d+) "
    r"in a world of size (?P<size>\d+)"
)
_KV = re.compile(
    r"\b(?P<key>min_nodes|max_nodes|nproc_per_node|rdzv_backend|rdzv_endpoint|run_id"
    r"|max_restarts|group_rank|group_world_size|role_world_size|restart_count|join_timeout"
    r"|master_addr|master_port)\s*[=:]\s*'?(?P<value>[^',\s)}]+)"
)
_BARRIER = re.compile(
    r"world_size=(?P<w>\d+), (?:worker_count|num_workers_joined)=(?P<c>\d+)"
    r"(?:, timeout=(?P<t>[^)]+))?"
)
_CLIENTS = re.compile(
    r"Timed out after (?P<t>\d+) seconds waiting for clients\. (?P<c>\d+)/(?P<w>\d+) clients joined"
)
_MISSING = re.compile(r"missing ranks?:? (?P<ranks>\d+(?:\s*(?:,|-)\s*\d+)*)")
_JOIN_TIMEOUT = re.compile(
    r"join timeout (?P<s>[\d.]+) ?s|timed out after (?P<t>[\d.]+) s\b"
    r"|timeout=(?P<h>\d+):(?P<mi>\d\d):(?P<se>\d\d)|timeout=(?P<m>[\d.]+)(?P<unit>ms|s)?\b"
    r"|'(?:join_)?timeout': (?P<c>[\d.]+)"
)
#: rdzv_configs' join_timeout, before its 'timeout' (which c10d's join does not use)
_CONF_JOIN = re.compile(r"'join_timeout': '?(?P<c>[\d.]+)")
_CONF_RANK = re.compile(r"rdzv_configs.*'rank': (?P<rank>\d+)")
_BLOCK_ITEM = re.compile(r"(?P<key>\w+)\s*[:=]\s*(?P<value>.*)$")
_HOSTS = re.compile(r"Process (?P<pid>\d+) hosts the TCP store")
_SIGNAL = re.compile(
    r"(?:Signal (?P<sig>\d+) \((?P<name>SIG\w+)\) received|[Rr]eceived (?P<sig2>\d+) death signal"
    r"|killed by the harness \((?P<name2>SIG\w+)\))"
)
_EXIT = re.compile(r"exitcode\s*:?\s*(?P<code>-?\d+)")
_RESTART = re.compile(r"Worker group FAILED\. (?P<left>\d+)/(?P<n>\d+) attempts left")
_RANK_IN = re.compile(
    r"^rank (?P<rank>\d+) (?:\(join timeout|could not host)"
    r"|this node, rank (?P<me>\d+) \(vm pid \d+\), waited"
)
_BOX_RANK = re.compile(r"rank\s*:\s*(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_ENDPOINT = re.compile(
    r"(?:to|at|host) \(?\[?(?P<host>[A-Za-z0-9_.:-]+?)\]?(?:, |:)(?P<port>\d{2,5})\)?"
)
_OTHERS_LOSS = re.compile(r"rank \d+ \(vm pid \d+\) (?:lost|disappeared)")
_KEY = re.compile(r"key[: ]+'?(?P<key>[\w/:.-]+)'?")


@dataclass(frozen=True)
class Observation:
    """One thing the log says, with the line that says it."""

    kind: str
    line: Line
    data: dict[str, Any] = field(default_factory=dict)
    #: The node a harness report names (its ``node N`` lines, its event panels).
    node: int | None = None


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _ranks(text: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*,\s*", text):
        if "-" in part:
            low, high = (int(x) for x in part.split("-", 1))
            out.extend(range(low, high + 1))
        elif part.strip().isdigit():
            out.append(int(part))
    return out


class Reader:
    """Feed lines in order with :meth:`read`; each call yields what that line says."""

    def __init__(self) -> None:
        self._panel_node: int | None = None
        self._in_box = False
        self._box: dict[str, Any] = {}
        self._box_line: Line | None = None
        self._block: str | None = None
        self._block_from: tuple[str, str | None] | None = None

    def _block_item(self, line: Line) -> Iterator[Observation]:
        """An indented ``key : value`` line of the launch-config block or of the
        ``Rendezvous complete for workers. Result:`` block."""
        m = _BLOCK_ITEM.match(line.text)
        if m is None:
            return
        key, value = m["key"], m["value"].strip()
        if key == "local_ranks":
            count = len([v for v in value.strip("[]").split(",") if v.strip()])
            yield Observation("launch", line, {"nproc_per_node": str(count)})
            return
        if self._block == "launch":
            yield Observation("launch", line, {key: value})
        yield from self._text(line, f"{key}={value}", None)

    def read(self, line: Line) -> Iterator[Observation]:
        if line.fmt == "harness-report":
            self._panel_node = None
            yield Observation(
                "outcome", line, {"status": line.status, "message": line.text}, node=line.node
            )
            if line.text:
                yield from self._text(line, line.text, line.node)
            return
        if m := re.match(r"node (\d+) events:$", line.text):
            self._panel_node = int(m[1])
            return
        if line.fmt == "harness-event" and self._panel_node is not None:
            yield from self._rdzv_event(line, line.event or "", line.text, self._panel_node)
            return
        yield from self._box_lines(line)
        text = line.text
        # the block's items: indented plain lines (one multi-line message), or lines of the
        # same logger and format, one item each (torch >= 2.4 logs the launch configs so)
        continued = line.fmt == "plain" and line.raw[:1] in (" ", "\t")
        itemised = (line.fmt, line.logger) == self._block_from and _BLOCK_ITEM.match(text)
        if self._block and (continued or itemised):
            yield from self._block_item(line)
            return
        self._block = None
        if "launch configs" in text:
            self._block = "launch"
        elif "Rendezvous complete for workers" in text:
            self._block = "result"
        self._block_from = (line.fmt, line.logger) if line.fmt != "plain" else None
        if text.startswith("{") or '{"' in text:
            yield from self._json(line, text[text.index("{") :])
            return
        yield from self._text(line, text, None)

    def _box_lines(self, line: Line) -> Iterator[Observation]:
        text = line.text
        if "Root Cause" in text or "Other Failures" in text:
            self._in_box, self._box, self._box_line = True, {}, line
            return
        if not self._in_box:
            return
        if m := _BOX_RANK.search(text):
            self._box["rank"], self._box["local"] = int(m["rank"]), int(m["local"])
        elif text.startswith("host"):
            self._box["host"] = text.split(":", 1)[-1].strip()
        elif m := _EXIT.search(text):
            self._box["exitcode"] = int(m["code"])
        elif text.startswith("error_file") or text.startswith("traceback"):
            if "Signal" in text and (s := _SIGNAL.search(text)):
                self._box["signal"] = s["name"]
        elif set(text) <= set("=-"):
            if self._box:
                yield Observation("died", line, dict(self._box))
                self._box = {}
            if self._box_line is not None and line.lineno - self._box_line.lineno > 2:
                self._in_box = False

    def _json(self, line: Line, text: str) -> Iterator[Observation]:
        try:
            doc = json.loads(text)
        except ValueError:
            yield from self._text(line, text, None)
            return
        if not isinstance(doc, dict):
            return
        inner = doc.get("message")
        if isinstance(inner, dict):  # the error file
            message = str(inner.get("message", ""))
            yield from self._text(line, message.splitlines()[0] if message else "", None)
            return
        if "node_state" in doc:  # RdzvEvent
            yield from self._text(line, str(doc.get("message", "")), None)
            if doc.get("node_state") == "FAILED" and doc.get("error_trace"):
                yield from self._text(line, str(doc["error_trace"]).strip().splitlines()[-1], None)
            return
        name = str(doc.get("name", ""))
        meta = doc.get("metadata") or {}
        if name.startswith("torchelastic.worker.status."):
            state = name.rsplit(".", 1)[-1]
            if state == "FAILED":
                yield Observation("died", line, {"rank": meta.get("group_rank"), "exitcode": None})
                if meta.get("raw_error"):
                    yield from self._text(
                        line, str(meta["raw_error"]).strip().splitlines()[-1], None
                    )
            elif state == "SUCCEEDED":
                yield Observation("complete", line)
            if isinstance(meta.get("group_rank"), int):
                yield Observation("rank", line, {"rank": meta["group_rank"]})
            if meta.get("agent_restarts"):
                yield Observation("restart", line, {"left": None})

    def _rdzv_event(
        self, line: Line, name: str, rest: str, node: int | None
    ) -> Iterator[Observation]:
        fields = {k: _value(v) for k, v in _FIELD.findall(rest)} if "=" in rest else {}
        worker = name == "pg_ready"  # a worker's RANK and WORLD_SIZE, not the node's
        if isinstance(fields.get("rank"), int) and not worker:
            yield Observation("rank", line, {"rank": fields["rank"]}, node)
        if isinstance(fields.get("world_size"), int) and not worker:
            yield Observation("world", line, {"size": fields["world_size"]}, node)
        if name in ("joined", "complete", "connected", "connect_attempt", "started", "shutdown"):
            yield Observation(name, line, fields, node)
        if name == "server_listening":
            yield Observation("store_host", line, {"pid": None}, node)
        timeout = fields.get("join_timeout") if name == "join_start" else None
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
            yield Observation("join_timeout", line, {"seconds": float(timeout)}, node)
        if name in JOB_STAGES:  # a job node's stages (the harness's node log)
            yield Observation("stage", line, {"stage": name, **fields}, node)
            if name == "restart":
                yield Observation("restart", line, {"left": None}, node)
            if name == "worker_failed":
                cls = str(fields.get("error_class") or "RuntimeError")
                message = fields["message"] if isinstance(fields.get("message"), str) else rest
                data = {"cls": cls, "outcome": outcome_of(cls, message), "message": message}
                yield Observation("error", line, data, node)
                yield from self._causes(line, message, node)
            return
        error = fields.get("error") if isinstance(fields.get("error"), str) else None
        if name in _AFTER_THE_VERDICT:
            return  # its wait (for the acks, the departures) ended: no cause of the round's
        if name == "connect_attempt" and error:
            yield from self._causes(line, error, node)
        elif name == "failed" and error and not isinstance(fields.get("message"), str):
            # the key=value form: the class in ``error``, no message
            yield Observation("error", line, {"cls": error, "outcome": outcome_of(error)}, node)
        elif name in ("failed", "diagnosing") or error:
            yield from self._text(line, str(fields.get("message") or rest), node, event=name)

    def _text(
        self, line: Line, text: str, node: int | None, event: str | None = None
    ) -> Iterator[Observation]:
        m = _RDZV_EVENT.match(text) if line.fmt == "plain" or event is None else None
        if m is not None and m["name"] in _RDZV_NAMES:
            yield from self._rdzv_event(line, m["name"], m["msg"] or m["fields"], node)
            return
        if m := _TORCH_JOINED.search(text):
            yield Observation("rank", line, {"rank": int(m["rank"])}, node)
            yield Observation("world", line, {"size": int(m["size"])}, node)
            yield Observation("joined", line, {}, node)
        if "Rendezvous complete for workers" in text or "Completed store-based barrier" in text:
            yield Observation("complete", line, {}, node)
        if (
            "Starting elastic_operator" in text
            or "launch configs" in text
            or "rdzv_configs" in text
        ):
            yield Observation("launch", line, {k: v for k, v in _KV.findall(text)}, node)
        if m := _CONF_RANK.search(text):
            yield Observation("rank", line, {"rank": int(m["rank"])}, node)
        for key, value in _KV.findall(text):
            if key == "group_rank" and value.isdigit():
                yield Observation("rank", line, {"rank": int(value)}, node)
            elif key in ("group_world_size",) and value.isdigit():
                yield Observation("world", line, {"size": int(value)}, node)
        if m := _HOSTS.search(text):
            yield Observation("store_host", line, {"pid": int(m["pid"])}, node)
        for pattern in (_BARRIER, _CLIENTS):
            if m := pattern.search(text):
                counts = {"world_size": int(m["w"]), "worker_count": int(m["c"])}
                yield Observation("barrier", line, {**counts, "timeout": m["t"]}, node)
        if m := _MISSING.search(text):
            yield Observation("missing", line, {"ranks": _ranks(m["ranks"])}, node)
        if m := _RANK_IN.search(text):
            yield Observation("rank", line, {"rank": int(m["rank"] or m["me"])}, node)
        if m := _CONF_JOIN.search(text) or _JOIN_TIMEOUT.search(text):
            g = m.groupdict()
            # rdzv_configs' 'timeout' (torchrun's 900 s by default): static's join timeout,
            # never c10d's (the facts drop it for c10d)
            conf = {"rdzv_timeout": True} if m.re is _JOIN_TIMEOUT and g.get("c") else {}
            seconds = g.get("s") or g.get("t") or g.get("m") or g.get("c")
            scale = 0.001 if g.get("unit") == "ms" else 1.0
            if g.get("h") is not None:
                seconds = str(int(g["h"]) * 3600 + int(g["mi"]) * 60 + int(g["se"]))
            if seconds:
                data = {"seconds": float(seconds) * scale, **conf}
                yield Observation("join_timeout", line, data, node)
        if m := _SIGNAL.search(text):
            yield Observation(
                "died", line, {"signal": m["name"] or m["name2"] or f"signal {m['sig2']}"}, node
            )
        if m := _RESTART.search(text):
            yield Observation("restart", line, {"left": int(m["left"]), "of": int(m["n"])}, node)
        if "duplicate rank" in text:
            yield Observation("mismatch", line, {"kind": "duplicate_rank"}, node)
        if "world size mismatch" in text or "different world sizes" in text:
            yield Observation("mismatch", line, {"kind": "world_size"}, node)
        if m := _ERROR_LINE.search(text):
            message = m["msg"] or ""
            cls = m["cls"]
            yield Observation(
                "error",
                line,
                {"cls": cls, "outcome": outcome_of(cls, message), "message": message},
                node,
            )
        elif event == "failed":
            yield Observation(
                "error",
                line,
                {"cls": None, "outcome": outcome_of_message(text), "message": text},
                node,
            )
        yield from self._causes(line, text, node)

    def _causes(self, line: Line, text: str, node: int | None) -> Iterator[Observation]:
        if _OTHERS_LOSS.search(text):  # a report of another rank's failure, not this node's
            return
        barrier = _BARRIER.search(text) is not None  # its timeout is the barrier's own
        for cause, pattern in CAUSES:
            if barrier and cause == "key_wait":
                continue
            if pattern.search(text):
                data: dict[str, Any] = {"cause": cause}
                if m := _ENDPOINT.search(text):
                    data["host"], data["port"] = m["host"], int(m["port"])
                if cause == "key_wait" and (k := _KEY.search(text)):
                    data["key"] = k["key"]
                yield Observation("cause", line, data, node)


#: rdzv's waits after a verdict (acks, the exit barrier): their errors are no cause.
_AFTER_THE_VERDICT = frozenset({"linger_ended", "read_wait_ended", "exit_wait", "exit_wait_ended"})

#: A job node's stages (docs/jobs.md), as the harness's node log names them.
JOB_STAGES = frozenset(
    {
        "rendezvous_done",
        "workers_started",
        "restart",
        "pg_ready",
        "collective_done",
        "worker_failed",
    }
)

_RDZV_NAMES = (
    JOB_STAGES
    | _AFTER_THE_VERDICT
    | frozenset(
        {
            "started",
            "join_start",
            "connect_attempt",
            "connected",
            "joined",
            "complete",
            "failed",
            "diagnosing",
            "server_listening",
            "bind_fallback",
            "member_lost",
            "shutdown",
            "store_client_cut",
            "store_connection_dropped",
        }
    )
)
