"""Job nodes for the tests of harness/world/jobs: each a process running ``run_job``.

``python -m tests.harness.job_nodes SPEC_JSON`` runs one node and prints one JSON line per
stage (``{"stage": ...}``) and a last line ``{"result": ...}``. :func:`job_nodes` starts N of
them (node 0 serves on a socket bound to port 0 and handed over), each in a session of its
own, and kills every session at the end, also when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any


def main(raw: str) -> None:
    from harness.world.process.jobs.run import import_torch, run_job
    from harness.world.process.torch_backends import HandlerArgs
    from harness.world.specs import JobSpec

    args = json.loads(raw)
    import_torch()

    def sink(part: str, stage: str, t: float, fields: dict[str, Any]) -> None:
        print(json.dumps({"part": part, "stage": stage, "fields": fields}), flush=True)

    where = HandlerArgs(
        args["endpoint"],
        "test-job",
        args["rank"],
        args["nodes"],
        args["join"],
        {},
        args["listen_fd"],
    )
    result = run_job(JobSpec(**args["spec"]), sink, args["backend"], where)
    print(json.dumps({"result": [asdict(part) for part in result.parts]}), flush=True)


@contextmanager
def job_nodes(
    tmp: Path, nodes: int, backend: str, spec: dict[str, Any], join: float = 60
) -> Iterator[list[subprocess.Popen[str]]]:
    """Start ``nodes`` job nodes; yields their processes (stdout: the JSON lines)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    processes: list[subprocess.Popen[str]] = []
    try:
        for rank in range(nodes):
            fd = listener.fileno() if rank == 0 else None
            args = {
                "spec": spec,
                "backend": backend,
                "endpoint": f"127.0.0.1:{port}",
                "rank": rank,
                "nodes": nodes,
                "join": join,
                "listen_fd": fd,
            }
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.harness.job_nodes", json.dumps(args)],
                    stdout=subprocess.PIPE,
                    stderr=(tmp / f"node{rank}.err").open("w"),
                    text=True,
                    pass_fds=(fd,) if fd is not None else (),
                    start_new_session=True,
                    env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
                )
            )
        listener.close()
        yield processes
    finally:
        listener.close()
        for process in processes:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def read(
    process: subprocess.Popen[str], timeout: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A node's stages and its parts' results (once it ended)."""
    out, _ = process.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stages = [line for line in lines if "stage" in line]
    results = next((line["result"] for line in lines if "result" in line), [])
    return stages, results


if __name__ == "__main__":
    main(sys.argv[1])
