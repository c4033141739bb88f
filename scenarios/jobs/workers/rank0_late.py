"""RANK 0's worker holds back its init_process_group (and so its keys: the store-based
barrier's and gloo's address) for ``LATE_SECONDS``, past the others' timeout."""

import os
import time

import torch
import torch.distributed as dist

if os.environ["RANK"] == "0":
    time.sleep(float(os.environ.get("LATE_SECONDS", "20")))
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
dist.destroy_process_group()
