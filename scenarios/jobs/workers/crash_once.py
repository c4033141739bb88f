"""A worker that dies right after init_process_group in attempt 0 on node 1 (GROUP_RANK 1),
then, restarted, joins a new process group and all-reduces rank + 1 like the default."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
if os.environ["GROUP_RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    raise RuntimeError("worker crashes on purpose in attempt 0")
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
dist.destroy_process_group()
