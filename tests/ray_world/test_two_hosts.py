"""The Ray world on two hosts: groups spread over them, and links cross from one to the other.

The cluster is two Ray nodes on this machine (``ray.cluster_utils.Cluster``, both bound to
127.0.0.1), made and shut down by a driver process of its own (two_hosts_driver.py), ended
by PID if it overruns.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.world.ray.session import INSTALL, unavailable

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(unavailable() is not None, reason=f"Ray is not installed: {INSTALL}"),
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_node_groups_spread_over_two_hosts_and_toxics_act_on_links_between_them() -> None:
    scenario = {
        "name": "ray-two-hosts",
        "description": "node 0 alone, then two groups of two: three actors on two hosts",
        "world": "ray",
        "seed": 7,
        "nodes": 5,
        "pack": 2,
        "timeouts": {"join": 60},
        "fault": [
            {
                "kind": "toxic",
                "type": "latency",
                "stream": "downstream",
                "attributes": {"latency": 50},
            },
        ],
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    driver = subprocess.Popen(
        [sys.executable, str(HERE / "two_hosts_driver.py"), json.dumps(scenario)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        out, err = driver.communicate(timeout=240)
    finally:
        if driver.poll() is None:  # overran: SIGTERM lets it shut its cluster down
            driver.terminate()
            try:
                driver.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
                driver.communicate()
    assert driver.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])

    assert result["hosts"] == 2
    assert result["passed"], result
    hosts = {re.search(r"Ray node (\w+)", o["placement"]).group(1) for o in result["outcomes"]}
    assert len(hosts) == 2, [o["placement"] for o in result["outcomes"]]
    node0_host = re.search(r"Ray node (\w+)", result["outcomes"][0]["placement"]).group(1)
    across = [o["node"] for o in result["outcomes"] if node0_host not in o["placement"]]
    assert across, "no node ran on the other host"
    assert all(result["outcomes"][n]["status"] == "ok" for n in across)
    assert result["acted"][0], "the latency toxic never acted"
