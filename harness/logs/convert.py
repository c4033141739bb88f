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
from harness.logs.job_facts import is_job, job_facts, split
from harness.logs.job_plan import job_plan
from harness.logs.lines import Line, classify
from harness.logs.plan import plan
from harness.logs.planned import Plan
from harness.logs.signals import Observation, Reader
from harness.logs.streams import group
from harness.logs.write import render

__all__ = ["WORLDS", "Conversion", "FromLogError", "convert"]

#: Where a scenario from a log replays the network's causes (``--world``).
WORLDS = ("local", "netns")
#: The causes on the wire that the two worlds replay differently (faults_for's ``_kernel``).
_NETWORK_CAUSES = frozenset({"connect_timeout", "silent", "refused", "no_route"})
_LOCAL_NETWORK = (
    "no line says the nodes ran in network namespaces of their own: the network's causes "
    "(no answer, refused, no route) are replayed by the local world's proxy links; "
    "--world netns replays them with the kernel's drops and rejects"
)


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
            f"launcher: {'torchrun job' if p.job is not None else f.launcher}; "
            f"backend: {f.backend or 'not stated'}; {len(f.nodes)} "
            f"nodes; join timeout {f.join_timeout:g} s; world: {p.world}"
        )
        for fact in f.facts:
            out.append(f"inferred: {fact.what}" + _cite(fact.lines))
        for planned in p.job_why + p.overrides + p.faults:
            out.append(f"inferred: {planned.why}" + _cite(planned.lines))
        for node, outcome in sorted(p.expect.items()):
            if outcome == "any":
                continue
            n = f.node(node)
            out.append(
                f"node {node}: {outcome.replace('|', ' or ')}"
                + (_cite([n.outcome_line]) if n.outcome_line else "")
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


def _world(facts: Facts, asked: str | None) -> tuple[str, list[str]]:
    """The world the scenario runs in, and what that assumes: ``asked`` (``--world``), else
    the netns world when the log says the nodes ran in namespaces of their own, else the
    local world."""
    if asked is not None and asked not in WORLDS:
        raise FromLogError(f"--world {asked!r} is not a world from-log writes for: {WORLDS}")
    network = any(c.data["cause"] in _NETWORK_CAUSES for n in facts.nodes for c in n.causes)
    kernel = facts.kernel_network
    if asked == "netns":
        said = f" (as {kernel.where} says too)" if kernel else ""
        return asked, [f"the network was the kernel's, as --world netns says{said}"]
    if asked == "local":
        said = f" though {kernel.where} says the nodes ran in namespaces" if kernel else ""
        return asked, [f"--world local: the network's causes are replayed by proxy links{said}"]
    if kernel is not None:
        return "netns", []
    if not network:
        return "local", []
    return "local", [_LOCAL_NETWORK]


def convert(
    logs: Sequence[tuple[str, str]], name: str = "from-log", world: str | None = None
) -> Conversion:
    """Read ``logs`` (``(source name, text)`` each: one file per node, or several nodes'
    lines in one) and write the scenario that replays their failure; ``world``: where the
    network's causes are replayed (``local`` or ``netns``; default: ``netns`` when the log
    says the nodes ran in network namespaces of their own, else ``local``).

    Raises:
        FromLogError: the logs say nothing of how any node ended or what went wrong, or
            ``world`` is not one of :data:`WORLDS`.
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
    sources = [s for s, _ in logs]
    job_read: list[tuple[Line, list[Observation]]] = []
    job = is_job(read)
    agents = read
    if job:
        agents, job_read = split(read, sources)
    streams, assumptions = group(agents, sources)
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
    chosen, assumed = _world(facts, world)
    facts.assumptions.extend(assumed)
    result = plan(facts, everyone_logs, chosen)
    if job:
        job_plan(result, facts, job_facts(streams, job_read, facts.workers_per_node))
    else:
        _job_parts(facts, result)
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-") or "from-log"
    what = (
        "; ".join(p.why for p in result.job_why + result.overrides + result.faults)
        or "no fault: every node's outcome as logged"
    )
    description = f"Replays the failed start-up read from {', '.join(s for s, _ in logs)}: {what}."
    header = ["written by `harness from-log`: each part below quotes the log lines it came from"]
    header += [f"assumed: {a}" for a in facts.assumptions + result.assumptions]
    header += [f"not reproduced: {n}" for n in result.not_reproduced]
    text = render(result, slug, description, header)
    return Conversion(text, facts, result, read)
