"""A connect into a black hole that heals late in its budget still connects.

A store listens on loopback inside a namespace this test makes; an nft rule there drops every
packet to its port (a firewall that drops, a partition), then goes away 7.5 s into a 10.5 s
connect. One ``connect()`` for the whole budget would send its SYNs at 0, 1, 2, 3, 4, 5, 7 s
and next at 11 s (0, 1, 3, 7, 15 s on older kernels): it would miss the heal. Bounded
attempts send one about every second and connect within about a second of it.

Marked ``netns`` (run by ``tox -e netns``); skipped where the machine cannot host it (not
root, no nft). The namespace goes, with its rule, also on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from harness.world.netns import naming
from harness.world.netns.shell import in_namespace, run, why_not

# netns: it creates a namespace, so a plain pytest leaves it to `tox -e netns`.
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(why_not() is not None, reason=str(why_not())),
]

_CHILD = """
import json, random, sys
from rdzv.store.wire import _wire
from rdzv.store.client._connect import connect
from rdzv.store.server import StoreServer

server = StoreServer("127.0.0.1", 0).start()
print(server.port, flush=True)
sys.stdin.readline()
print("dialling", flush=True)
try:
    conn = connect("127.0.0.1", server.port, float(sys.argv[1]), random.Random(1), _wire.Limits())
    print(json.dumps({"attempts": conn.attempts, "elapsed": conn.elapsed}), flush=True)
    conn.channel.close()
except Exception as exc:
    print(json.dumps({"error": str(exc)}), flush=True)
server.close()
"""

TIMEOUT = 10.5
HEALS_AT = 7.5  # between the kernel's SYNs at 7 s and 11 s


def test_a_connect_into_a_black_hole_that_heals_late_connects_before_its_deadline() -> None:
    name = naming.namespace(naming.run_id(f"dial-{os.getpid()}-{time.time_ns()}"), "n0")
    run(["ip", "netns", "add", name])
    child: subprocess.Popen[str] | None = None
    try:
        run(in_namespace(name, ["ip", "link", "set", "lo", "up"]))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.Popen(
            in_namespace(name, [sys.executable, "-c", _CHILD, str(TIMEOUT)]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        port = int(child.stdout.readline())
        table = (
            "table inet dial {\n  chain input {\n    type filter hook input priority 0;\n"
            f"    tcp dport {port} drop\n  }}\n}}\n"
        )
        run(in_namespace(name, ["nft", "-f", "-"]), stdin=table)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "dialling"
        time.sleep(HEALS_AT)  # the fault's schedule: the path heals now
        run(in_namespace(name, ["nft", "delete", "table", "inet", "dial"]))
        result = json.loads(child.stdout.readline())
        assert child.wait(timeout=30) == 0
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(timeout=30)
        run(["ip", "netns", "del", name], check=False)
    assert "error" not in result, result["error"]
    assert result["attempts"] >= 2
    assert name not in naming.listed()
