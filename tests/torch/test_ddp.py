"""torch's own DistributedDataParallel over "procgroup" trains exactly like over torch's
gloo: the same model, data and steps through both, in the same ranks, give the same losses
and parameters to floating-point tolerance, with torch's default allreduce and with a
Python comm hook (fp16 compression) that runs on procgroup's futures.

    PYTHONPATH=build/python PROCGROUP_BACKEND=ucx /usr/bin/python3 tests/torch/test_ddp.py
"""
import copy
import os
import unittest

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import procgroup_torch
from torch_ranks import run_ranks

STEPS = int(os.environ.get("PG_TORCH_DDP_STEPS", "100"))
BATCH = 64


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.BatchNorm1d(512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.BatchNorm1d(256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))


def train_side_by_side(rank, world, hook):
    torch.manual_seed(1234 + rank)  # different initial weights: DDP's broadcast must fix them
    base = mlp()
    gloo = dist.new_group(backend="gloo")
    models = {"procgroup": DDP(copy.deepcopy(base)), "gloo": DDP(copy.deepcopy(base),
                                                                process_group=gloo)}
    if hook:
        models["procgroup"].register_comm_hook(None, default_hooks.fp16_compress_hook)
        models["gloo"].register_comm_hook(gloo, default_hooks.fp16_compress_hook)
    optimizers = {k: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
                  for k, m in models.items()}
    data = torch.Generator().manual_seed(99 + rank)
    teacher = torch.randn(784, 10, generator=torch.Generator().manual_seed(7))  # learnable labels
    losses = {k: [] for k in models}
    for _ in range(STEPS):
        x = torch.randn(BATCH, 784, generator=data)
        y = (x @ teacher).argmax(dim=1)
        for key, model in models.items():
            optimizers[key].zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizers[key].step()
            losses[key].append(loss.item())
    params = {k: torch.cat([p.detach().reshape(-1) for p in m.parameters()])
              for k, m in models.items()}
    # Every rank must hold the same parameters: gather rank 0's through procgroup.
    rank0 = params["procgroup"].clone()
    dist.broadcast(rank0, src=0)
    return (losses, (params["procgroup"] - params["gloo"]).abs().max().item(),
            (params["procgroup"] - rank0).abs().max().item(), procgroup_torch.plugin())


class DdpMatchesGloo(unittest.TestCase):
    def check(self, hook):
        results = run_ranks(train_side_by_side, world_size=2, timeout_s=240, args=(hook,))
        for rank, (losses, param_gap, replica_gap, plugin) in results.items():
            self.assertEqual(len(losses["procgroup"]), STEPS)
            # fp16 compression rounds the averaged gradients the same way on both sides; the
            # summation order may differ between the two backends, hence a tolerance.
            tolerance = 1e-3 if hook else 1e-4
            for step, (a, b) in enumerate(zip(losses["procgroup"], losses["gloo"])):
                self.assertAlmostEqual(a, b, delta=tolerance * max(1.0, abs(b)),
                                       msg=f"rank {rank} step {step}: procgroup {a}, gloo {b}")
            self.assertLess(param_gap, 1e-2 if hook else 1e-3, f"rank {rank}")
            self.assertEqual(replica_gap, 0.0, f"rank {rank}: replicas diverged")
            self.assertLess(losses["procgroup"][-1], losses["procgroup"][0])
        print(f"procgroup+{results[0][3]} vs torch gloo, {STEPS} steps{' with fp16 hook' if hook else ''}: "
              f"first loss {results[0][0]['procgroup'][0]:.4f}, last "
              f"{results[0][0]['procgroup'][-1]:.4f} (gloo {results[0][0]['gloo'][-1]:.4f}); "
              f"largest parameter gap {max(r[1] for r in results.values()):.2e}")

    def test_default_allreduce(self):
        self.check(hook=False)

    def test_python_comm_hook_on_futures(self):
        self.check(hook=True)


if __name__ == "__main__":
    unittest.main()
