"""docs/from-log.md's four conversions stay true: each example's logs still convert to the
scenario kept beside them (docs/from-log-examples/), which loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.logs import convert
from harness.scenario.load import load

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "from-log-examples"
CASES = [
    (["torch-static-node2.log"], "torch-static-node2.toml", "torch-static-node2"),
    (["torch-c10d-node0.log"], "torch-c10d-node0.toml", "torch-c10d-node0"),
    ([f"n04-netns/node-{i}.log" for i in range(8)], "n04-netns/replay.toml", "n04-replay"),
    (
        [f"torchrun-static-job/node-{i}.log" for i in range(2)],
        "torchrun-static-job/replay.toml",
        "job-replay",
    ),
]


@pytest.mark.parametrize(("logs", "scenario", "name"), CASES, ids=[c[2] for c in CASES])
def test_a_documented_conversion_still_writes_the_scenario_shown(
    logs: list[str], scenario: str, name: str
) -> None:
    texts = [(log, (EXAMPLES / log).read_text(encoding="utf-8")) for log in logs]
    written = convert(texts, name=name).text
    assert written == (EXAMPLES / scenario).read_text(encoding="utf-8")
    load(EXAMPLES / scenario)
