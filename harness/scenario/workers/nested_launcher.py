"""A launcher nested inside the worker: it hosts a store of its own on MASTER_PORT, which
the job's store already holds (EADDRINUSE), as a worker that starts a launch of its own
does. A new launch is no agent's worker: under ``TORCHELASTIC_USE_AGENT_STORE`` torch
ignores the failed bind and connects to the agent's store instead ("TORCHELASTIC_USE_AGENT_STORE
is enabled so ignoring the error"), so the nested launcher drops it."""

import os
from datetime import timedelta

import torch.distributed as dist

os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)
store = dist.TCPStore(
    os.environ["MASTER_ADDR"],
    int(os.environ["MASTER_PORT"]),
    is_master=True,
    timeout=timedelta(seconds=5),
)
