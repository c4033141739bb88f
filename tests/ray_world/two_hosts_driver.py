"""Run one scenario on a two-host Ray cluster on this machine; print what the report says.

Started by test_two_hosts.py as a process of its own (a Ray driver connects to one cluster
at a time, and the session's local Ray stays up meanwhile). Both hosts are Ray nodes
bound to 127.0.0.1 (``ray.cluster_utils.Cluster``); ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
must be in the environment before Ray is imported, or the second raylet and this driver look
for the head at the machine's own address. The cluster is shut down on the way out, also on
SIGTERM (the test's timeout), so no Ray process outlives this one.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def _stop(signum: int, frame: Any) -> None:
    raise SystemExit(f"stopped by signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _stop)
    import ray
    from ray.cluster_utils import Cluster

    from harness.run.suite import embedded_proxy, run_one
    from harness.scenario.load import parse
    from harness.world.ray.session import connect

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        session = connect(cluster.address)
        hosts = len([n for n in ray.nodes() if n["Alive"]])
        scenario = parse(json.loads(sys.argv[1]), "<two hosts>")
        report = run_one(scenario, embedded_proxy, scenario.seed or 1)
        session.close()
        print(
            json.dumps(
                {
                    "hosts": hosts,
                    "passed": report.passed,
                    "skipped": report.skipped,
                    "error": report.error,
                    "violations": [v.message for v in report.violations],
                    "outcomes": [
                        {"node": o.node, "status": o.status, "placement": o.placement}
                        for o in report.outcomes
                    ],
                    "acted": [f.acted for f in report.faults],
                }
            )
        )
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
