"""A launcher nested inside the worker: it hosts a store of its own on MASTER_PORT, which
the job's store already holds (EADDRINUSE), as a worker that runs torchrun or
``TCPStore(is_master=True)`` itself does."""

import os
from datetime import timedelta

import torch.distributed as dist

store = dist.TCPStore(
    os.environ["MASTER_ADDR"],
    int(os.environ["MASTER_PORT"]),
    is_master=True,
    timeout=timedelta(seconds=5),
)
