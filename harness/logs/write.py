"""A plan as a scenario file: TOML written with tomli-w, each part after ``#`` lines that
say why it is there and quote the log lines it came from.

The text is validated with :func:`harness.scenario.load.parse` before it is returned: what
``from-log`` writes always loads.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import tomli_w

from harness.errors import HarnessError
from harness.logs.lines import Line
from harness.logs.planned import ANY, RACE, RACED, Plan, PlannedFault
from harness.scenario.load import parse

__all__ = ["render"]

QUOTE_WIDTH = 160
#: What a node the log does not show may end as (anything but never started).
OPEN = ("ok", "timeout", "connection_error", "state_error", "closed", "error", "killed", "hung")


def _ranges(ranks: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``: rdzv's way of naming missing ranks."""
    spans: list[str] = []
    for rank in sorted(ranks):
        if spans and "-" not in spans[-1].split(", ")[-1] and int(spans[-1]) == rank - 1:
            spans[-1] = f"{rank - 1}-{rank}"
        elif spans and "-" in spans[-1] and int(spans[-1].split("-")[1]) == rank - 1:
            spans[-1] = f"{spans[-1].split('-')[0]}-{rank}"
        else:
            spans.append(str(rank))
    return ", ".join(spans)


def _comment(text: str) -> str:
    return "".join(f"# {line}\n" for line in text.splitlines())


def _quote(lines: Sequence[Line]) -> str:
    out = ""
    for line in lines:
        raw = line.raw if len(line.raw) <= QUOTE_WIDTH else line.raw[: QUOTE_WIDTH - 1] + "…"
        out += f"#   {line.where}: {raw}\n"
    return out


def _section(key: str, entries: Sequence[PlannedFault]) -> str:
    out = ""
    for planned in entries:
        out += "\n" + _comment(planned.why) + _quote(planned.lines)
        flat = {k: v for k, v in planned.entry.items() if not isinstance(v, dict)}
        out += f"[[{key}]]\n" + tomli_w.dumps(flat)
        for sub, table in planned.entry.items():
            if isinstance(table, dict):
                out += f"[{key}.{sub}]\n" + tomli_w.dumps(table)
    return out


def _expect(plan: Plan) -> dict[str, Any]:
    counts = Counter(v for v in plan.expect.values() if v not in (ANY, RACE))
    common = counts.most_common(1)[0][0] if counts else "ok"
    entries: list[dict[str, Any]] = []
    groups: dict[tuple[str, bool], list[int]] = {}
    for node, outcome in sorted(plan.expect.items()):
        names = node in plan.name_missing and bool(plan.missing)
        groups.setdefault((outcome, names), []).append(node)
    for (outcome, names), nodes in groups.items():
        shown: str | list[str] = (
            list(OPEN) if outcome == ANY else list(RACED) if outcome == RACE else outcome
        )
        entry: dict[str, Any] = {"nodes": nodes, "outcome": shown}
        if names:
            entry["message"] = f"missing ranks: {_ranges(plan.missing)}\\b"
        entries.append(entry)
    out: dict[str, Any] = {"outcome": common, "nodes": entries}
    if plan.parts:
        out["parts"] = plan.parts
    return out


def render(plan: Plan, name: str, description: str, header: Sequence[str]) -> str:
    """The scenario file's text. ``header``: comment lines for its top (what was read,
    what was assumed)."""
    top: dict[str, Any] = {
        "name": name,
        "description": description,
        "seed": 1,
        "nodes": plan.nodes,
    }
    if plan.world != "local":
        top["world"] = plan.world
    text = "".join(f"# {line}\n" for line in header)
    text += tomli_w.dumps(top)
    timeouts = {"join": plan.join} | ({"hard": plan.hard} if plan.hard else {})
    text += "\n" + tomli_w.dumps({"timeouts": timeouts})
    if plan.endpoint_host:
        text += "\n" + _comment("the endpoint is the host name the log could not resolve")
        text += tomli_w.dumps({"endpoint": {"host": plan.endpoint_host}})
    if plan.job is not None:
        text += "\n" + _comment("a torchrun job: an agent and its workers per node (docs/jobs.md)")
        for planned in plan.job_why:
            text += _comment(planned.why) + _quote(planned.lines)
        text += tomli_w.dumps({"job": plan.job})
    text += _section("override", plan.overrides)
    text += _section("fault", plan.faults)
    text += (
        "\n" + _comment("how each node ended in the log") + tomli_w.dumps({"expect": _expect(plan)})
    )
    try:
        parse(tomllib.loads(text), f"<from-log {name}>")
    except (HarnessError, tomllib.TOMLDecodeError) as exc:  # a bug here, not in the log
        raise HarnessError(
            f"from-log wrote a scenario that does not load ({exc}); this is a bug in "
            f"harness.logs, please report it with the log. The text was:\n{text}"
        ) from exc
    return text
