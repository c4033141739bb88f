"""The round trip in the netns world: run each of scenarios/netns/ (a network namespace per
node, the kernel's drops, rejects, partitions, loss, rate limits), read its nodes' logs
back with ``from-log``, run what comes out: the same outcome class on every node and the
same missing ranks.

The nodes' ``started`` events say they ran in network namespaces of their own, so the
scenario that comes out runs in the netns world and replays the network's causes with the
kernel's faults (no answer -> ``drop``, refused -> ``reject``, no route -> ``reject``
answering host-unreachable). Marked ``netns``: a plain pytest leaves them to ``tox -e
netns``; skipped where the machine cannot host the world (not root, no nft). Each test
removes the namespaces this process made, also on failure, and fails if any were left.
The original run must pass its own expectations (this is where ``tox -e netns`` checks that
every shipped netns scenario passes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from from_log_support import assert_same_symptom, no_namespace_left, round_trip

from harness.world.netns.shell import why_not

ROOT = Path(__file__).resolve().parents[2]
NETNS = sorted((ROOT / "scenarios" / "netns").glob("*.toml"))

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(why_not() is not None, reason=str(why_not())),
]


@pytest.fixture(autouse=True)
def _no_namespace_left() -> Iterator[None]:
    with no_namespace_left():
        yield


@pytest.mark.parametrize("path", NETNS, ids=lambda p: p.stem)
def test_a_netns_scenarios_logs_replay_in_the_netns_world_with_the_same_outcomes(
    path: Path, tmp_path: Path
) -> None:
    original, replay, text = round_trip(path, tmp_path)
    assert original.passed, f"{path.name} failed: {original.violations}"
    assert 'world = "netns"' in text, text
    assert_same_symptom(original, replay, text)
