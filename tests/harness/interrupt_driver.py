"""Run one scenario with ``run_suite`` in this process's main thread, and deliver SIGINT to
one of the scenario's worker threads (never the main thread) once every node has reported
in: the way a process-directed Ctrl-C can land. Prints ``INTERRUPTED <n reports>`` if the
suite raised ``SuiteInterrupted``, else ``FINISHED``.

Usage: ``python interrupt_driver.py SCENARIO.toml NODES`` with ``HARNESS_TEST_READY_PORT``
unset: the driver listens itself and hands the port to the nodes through the environment.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

from waiting_backend import READY_PORT

from harness.run.suite import SuiteInterrupted, run_suite
from harness.scenario.load import load


def main() -> int:
    path, nodes = sys.argv[1], int(sys.argv[2])
    ready = socket.create_server(("127.0.0.1", 0))
    ready.settimeout(120)
    os.environ[READY_PORT] = str(ready.getsockname()[1])
    held: list[socket.socket] = []

    def interrupt_a_worker() -> None:
        for _ in range(nodes):  # every node runs once it has reported in
            held.append(ready.accept()[0])
        workers = [t for t in threading.enumerate() if t.name.startswith("harness-scenario")]
        signal.pthread_kill(workers[0].ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt_a_worker, name="interrupter", daemon=True).start()
    try:
        run_suite([load(path)])
    except SuiteInterrupted as exc:
        print(f"INTERRUPTED {len(exc.reports)} {exc.reports[0].interrupted}", flush=True)
        return 130
    finally:
        for conn in held:
            conn.close()
        ready.close()
    print("FINISHED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
