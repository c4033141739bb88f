import os, time
from datetime import timedelta
import torch
import torch.distributed as dist
if os.environ["RANK"] == "0":
    time.sleep(7)
dist.init_process_group("gloo", timeout=timedelta(seconds=4))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
dist.destroy_process_group()
