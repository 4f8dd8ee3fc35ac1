"""A torch script as users write it, for a real torchrun (test_torchrun.py): the default
launch, whose agent hosts the store, and init_process_group("procgroup") from env://."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import procgroup_torch  # noqa: F401  (registers "procgroup")

dist.init_process_group("procgroup")
rank, world = dist.get_rank(), dist.get_world_size()
agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE")

t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
want = world * (world + 1) / 2
assert torch.all(t == want), f"all_reduce gave {t[:4]}, want {want}"

names = [None] * world
dist.all_gather_object(names, f"rank{rank}")
assert names == [f"rank{r}" for r in range(world)], names

torch.manual_seed(rank)  # different weights: DDP's broadcast makes them equal
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    optimizer.zero_grad()
    model(torch.randn(4, 16)).sum().backward()
    optimizer.step()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
rank0 = flat.clone()
dist.broadcast(rank0, src=0)
assert torch.equal(flat, rank0), "DDP replicas diverged"

print(f"rank {rank} of {world}: ok (plugin {procgroup_torch.plugin()}, "
      f"TORCHELASTIC_USE_AGENT_STORE={agent_store})", flush=True)
dist.destroy_process_group()
