"""``from-log``'s one entry point: logs in, a scenario text and its explanation out.

:func:`convert` takes the logs as ``(name, text)`` pairs (it does no I/O), reads every line
(:mod:`~harness.logs.lines`, :mod:`~harness.logs.signals`), groups them by node
(:mod:`~harness.logs.streams`), infers the facts (:mod:`~harness.logs.facts`) and the faults
(:mod:`~harness.logs.plan`) and writes the scenario (:mod:`~harness.logs.write`).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.logs.facts import Facts, gather
from harness.logs.lines import Line, classify
from harness.logs.plan import plan
from harness.logs.planned import Plan
from harness.logs.signals import Observation, Reader
from harness.logs.streams import group
from harness.logs.write import render

__all__ = ["Conversion", "FromLogError", "convert"]


class FromLogError(HarnessError):
    """The logs do not say enough to write a scenario; the message says what is missing."""


@dataclass
class Conversion:
    """A scenario text, and what was inferred (with its lines) and assumed."""

    text: str
    facts: Facts
    plan: Plan
    #: Every line read, with what it says: the ``--explain`` trace.
    read: list[tuple[Line, list[Observation]]] = field(default_factory=list)

    def summary(self) -> list[str]:
        """What the console prints: inferred (from which lines), assumed, not reproduced."""
        f, p = self.facts, self.plan
        known = sum(f.formats.values())
        formats = ", ".join(f"{n} {name}" for name, n in f.formats.most_common())
        read = f"read {known + f.unknown} lines: {formats or 'none'}"
        out = [f"{read}; {f.unknown} not understood (skipped)"]
        out.append(
            f"launcher: {f.launcher}; backend: {f.backend or 'not stated'}; {len(f.nodes)} "
            f"nodes; join timeout {f.join_timeout:g} s"
        )
        for fact in f.facts:
            out.append(f"inferred: {fact.what}" + _cite(fact.lines))
        for planned in p.overrides + p.faults:
            out.append(f"inferred: {planned.why}" + _cite(planned.lines))
        for node, outcome in sorted(p.expect.items()):
            if outcome == "any":
                continue
            n = f.node(node)
            out.append(
                f"node {node}: {outcome}" + (_cite([n.outcome_line]) if n.outcome_line else "")
            )
        out.extend(f"assumed: {a}" for a in f.assumptions + p.assumptions)
        out.extend(f"not reproduced: {n}" for n in p.not_reproduced)
        return out

    def trace(self) -> list[str]:
        """Every line that said something, and what (``--explain``)."""
        out = []
        for line, observations in self.read:
            said = "; ".join(f"{o.kind} {o.data}" if o.data else o.kind for o in observations)
            out.append(f"{line.where} [{line.fmt}] {said or '(nothing used)'}")
        return out


def _cite(lines: Sequence[Line]) -> str:
    return f" (from {', '.join(line.where for line in lines)})" if lines else ""


def _job_parts(facts: Facts, result: Plan) -> None:
    if facts.launcher != "torchrun":
        return
    parts = []
    if facts.workers_per_node:
        parts.append(f"{facts.workers_per_node} workers per node")
    else:
        parts.append("the workers of each node")
    if facts.max_restarts is not None:
        parts.append(f"max_restarts {facts.max_restarts}")
    if facts.restarts:
        parts.append(
            f"{len(facts.restarts)} worker-group restart(s) seen ({facts.restarts[0].line.where})"
        )
    if facts.barriers:
        parts.append(f"the workers' store-based barrier ({facts.barriers[0].line.where})")
    job = [o.line.where for n in facts.nodes for o in n.job_errors if o.kind == "error"]
    if job:
        parts.append(f"the workers' errors after the rendezvous ({', '.join(job[:3])})")
    result.not_reproduced.append(
        "this is a torchrun job; scenario files cannot describe jobs yet, so the scenario "
        "replays the "
        "rendezvous-level symptom with a plain rendezvous per node; the job-level parts are not "
        f"reproduced: {', '.join(parts)}"
    )


def convert(logs: Sequence[tuple[str, str]], name: str = "from-log") -> Conversion:
    """Read ``logs`` (``(source name, text)`` each: one file per node, or several nodes'
    lines in one) and write the scenario that replays their failure.

    Raises:
        FromLogError: the logs say nothing of how any node ended or what went wrong.
    """
    read: list[tuple[Line, list[Observation]]] = []
    formats: Counter[str] = Counter()
    unknown = 0
    for source, raw_text in logs:
        # a JUnit report (harness run --junit): its node lines are XML-escaped
        text = html.unescape(raw_text) if raw_text.lstrip().startswith("<?xml") else raw_text
        reader = Reader()
        for number, raw in enumerate(text.splitlines(), 1):
            line = classify(raw, source, number)
            if line is None:
                continue
            observations = list(reader.read(line))
            if line.fmt == "plain" and not observations:
                unknown += 1
                continue
            formats[line.fmt] += 1
            read.append((line, observations))
    if not any(obs for _, obs in read):
        raise FromLogError(
            f"nothing in {', '.join(s for s, _ in logs) or 'the input'} "
            f"({unknown + len(read)} lines) is a line from torch, rdzv or the harness that says "
            "how a node ended or what failed; give the logs of the failed start-up (torchrun's "
            "or the workers' output, rdzv's events, a harness report)"
        )
    streams, assumptions = group(read, [s for s, _ in logs])
    facts = gather(streams, assumptions, formats, unknown)
    if (
        all(n.outcome is None for n in facts.nodes)
        and not facts.missing
        and not facts.barriers
        and not any(n.causes for n in facts.nodes)
    ):
        raise FromLogError(
            "the logs show no node ending, no error and no missing rank: nothing to reproduce; "
            "include the lines up to the failure (the traceback's last line, the ChildFailedError "
            "box, or rdzv's 'failed' event)"
        )
    # one file per node, or rdzv's events of several nodes: a node without a line never ran
    seen = sum(1 for n in facts.nodes if n.seen)
    everyone_logs = len(logs) > 1 or (facts.backend == "rdzv" and seen > 1)
    result = plan(facts, everyone_logs)
    _job_parts(facts, result)
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-") or "from-log"
    what = (
        "; ".join(p.why for p in result.overrides + result.faults)
        or "no fault: every node's outcome as logged"
    )
    description = f"Replays the failed start-up read from {', '.join(s for s, _ in logs)}: {what}."
    header = ["written by `harness from-log`: each part below quotes the log lines it came from"]
    header += [f"assumed: {a}" for a in facts.assumptions + result.assumptions]
    header += [f"not reproduced: {n}" for n in result.not_reproduced]
    text = render(result, slug, description, header)
    return Conversion(text, facts, result, read)
