"""Real torchrun jobs on one machine for the plugin's tests: N agents, gloo workers.

Node 0's agent serves the rendezvous on a socket the test bound to port 0 and handed over
(``--rdzv-conf listen_fd=N``), so no port is probed and released. Every agent runs in a
session of its own; torch starts each worker in a session of its own, so a worker asks the
kernel to end it when its agent ends (``PR_SET_PDEATHSIG``). :meth:`Job.close` kills each
agent's session, also when a test fails.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

#: The default worker: init_process_group (gloo), one all-reduce of rank + 1, one line out.
WORKER = """
import ctypes, os, signal, sys

# torch starts each worker in a session of its own: it ends with its agent (the parent)
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
    if b"torch.distributed.run" not in parent.read():  # the agent died before the prctl
        os._exit(1)
import torch
import torch.distributed as dist

if os.environ.get("JOB_HOLD"):  # a healthy worker that never finishes (the agent decides)
    import threading
    print("WORKER_HELD", os.environ["RANK"], flush=True)  # its agent is past the round
    threading.Event().wait()
die_on = os.environ.get("JOB_DIE_ON")  # "GROUP_RANK:RESTART_COUNT": exit 3 after init
dist.init_process_group("gloo")
here = f"{os.environ['GROUP_RANK']}:{os.environ['TORCHELASTIC_RESTART_COUNT']}"
if die_on == here:
    print("WORKER_DIES", here, flush=True)
    os._exit(3)
if os.environ.get("JOB_LOOP"):  # all-reduce until a peer is gone (then raise: exit 1)
    dist.all_reduce(torch.tensor([1.0]))
    print("WORKER_LOOPS", os.environ["RANK"], flush=True)
    while True:
        dist.all_reduce(torch.tensor([1.0]))
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
print(
    "RESULT",
    f"rank={os.environ['RANK']}",
    f"world={os.environ['WORLD_SIZE']}",
    f"sum={value.item():g}",
    f"restart={os.environ['TORCHELASTIC_RESTART_COUNT']}",
    f"master_port={os.environ['MASTER_PORT']}",
    flush=True,
)
dist.destroy_process_group()
"""


@dataclass
class Agent:
    """One node's torchrun agent."""

    rank: int
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def results(self) -> list[dict[str, str]]:
        """The workers' RESULT lines, as dicts."""
        rows = []
        for line in self.output().splitlines():
            if line.startswith("RESULT "):
                rows.append(dict(item.split("=", 1) for item in line.split()[1:]))
        return rows


@dataclass
class Job:
    """The agents of one job (see the module doc)."""

    script: Path
    port: int  # the rendezvous endpoint's
    agents: list[Agent] = field(default_factory=list)

    def wait(self, timeout: float) -> list[int]:
        """Each agent's exit code (raises ``subprocess.TimeoutExpired`` past ``timeout``)."""
        return [agent.process.wait(timeout) for agent in self.agents]

    def close(self) -> None:
        for agent in self.agents:
            with suppress(ProcessLookupError):
                os.killpg(agent.process.pid, signal.SIGKILL)
            agent.process.wait()


@contextmanager
def torchrun_job(
    tmp: Path,
    nodes: int,
    *,
    max_restarts: int = 0,
    join_timeout: float = 60.0,
    read_timeout: float = 60.0,
    env: dict[str, str] | None = None,
    rank_flag: str = "--node-rank",
    python: Sequence[str] = (sys.executable,),
) -> Iterator[Job]:
    """Start ``nodes`` torchrun agents of backend ``rdzv`` running :data:`WORKER`, each as
    ``python -m torch.distributed.run`` (``python``: the interpreter and its flags)."""
    script = tmp / "worker.py"
    script.write_text(WORKER)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    job = Job(script, port)
    try:
        for rank in range(nodes):
            conf = [f"timeout={join_timeout:g}", f"read_timeout={read_timeout:g}"]
            if rank_flag == "--rdzv-conf":
                conf.append(f"rank={rank}")
            pass_fds: tuple[int, ...] = ()
            if rank == 0:
                conf.append(f"listen_fd={listener.fileno()}")
                pass_fds = (listener.fileno(),)
            command = [
                *python,
                "-m",
                "torch.distributed.run",
                "--rdzv-backend=rdzv",
                f"--rdzv-endpoint=127.0.0.1:{port}",
                f"--nnodes={nodes}",
                "--nproc-per-node=1",
                f"--max-restarts={max_restarts}",
                "--monitor-interval=0.2",
                "--rdzv-id=test-job",
                "--rdzv-conf=" + ",".join(conf),
            ]
            if rank_flag == "--node-rank":
                command.append(f"--node-rank={rank}")
            command.append(str(script))
            log = tmp / f"agent{rank}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    pass_fds=pass_fds,
                    start_new_session=True,
                    env={**os.environ, "LOGLEVEL": "INFO", **(env or {})},
                )
            job.agents.append(Agent(rank, process, log))
        listener.close()  # node 0's agent holds its own copy
        yield job
    finally:
        listener.close()
        job.close()
