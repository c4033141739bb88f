"""The worker of RANK ``SKIP_RANK`` never calls init_process_group (it waits ``SKIP_HOLD``
seconds, then exits 0); every other worker runs the default all-reduce, so their store-based
barrier counts one worker short."""

import os
import time

import torch
import torch.distributed as dist

if os.environ["RANK"] == os.environ.get("SKIP_RANK", "3"):
    time.sleep(float(os.environ.get("SKIP_HOLD", "20")))
    raise SystemExit(0)
dist.init_process_group("gloo")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
dist.destroy_process_group()
