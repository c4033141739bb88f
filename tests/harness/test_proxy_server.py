"""``python -m harness.proxy``: the standalone server without the rest of the harness."""

from __future__ import annotations

import subprocess
import sys
import time

from harness.proxy.process import START_WAIT, ProxyProcess


def test_the_proxy_server_module_imports_nothing_of_the_command_line_or_the_runner() -> None:
    # a proxy process is started per 2,048 links: what it imports, every one of them pays
    code = (
        "import sys, harness.proxy.server\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] != ['harness', 'proxy']"
        " and m.startswith('harness.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['harness.errors']"


def test_a_proxy_process_serves_the_api_and_ends_when_stopped() -> None:
    process = ProxyProcess(seed=7).launch()
    try:
        client = process.ready(time.monotonic() + START_WAIT)
        assert client.seed() == 7
        created = client.populate([{"name": "one", "upstream": "127.0.0.1:9"}])
        assert [info.name for info in created] == ["one"]
    finally:
        process.stop()
    assert not process.running
