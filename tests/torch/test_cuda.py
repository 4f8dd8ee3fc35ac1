"""CUDA tensors over "procgroup": the CUDA group goes to the nccl plugin on torch's current
stream (torch >= 2.2 built with CUDA, one GPU per rank). Skips, saying why, elsewhere:
ctest reads exit code 77 as skipped.

    PYTHONPATH=build/python /usr/bin/python3 tests/torch/test_cuda.py
"""
import sys
import unittest

import torch
import torch.distributed as dist

from torch_ranks import run_ranks

SKIP = 77


def why_not():
    if not torch.cuda.is_available():
        return f"no CUDA device for this torch ({torch.__version__})"
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 2):
        return f"torch {torch.__version__} cannot name its CUDA stream to a plugin (needs 2.2)"
    try:
        import procgroup_torch  # noqa: F401
    except ImportError as error:  # a build packed from another machine's torch
        return f"procgroup_torch does not load here: {error}"
    return ""


def on_the_gpu(rank, world):
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    out = []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # not the default stream: procgroup must follow torch's
        t = torch.arange(1 << 20, dtype=torch.float32, device=device) + rank
        dist.all_reduce(t)
        want = torch.arange(1 << 20, dtype=torch.float32, device=device) * world + \
            world * (world - 1) / 2
        out.append(("all_reduce", torch.equal(t, want)))
        t = torch.full((7,), float(rank), device=device)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        out.append(("all_reduce avg", torch.allclose(t, torch.full_like(t, (world - 1) / 2))))
        gathered = [torch.zeros(3, device=device) for _ in range(world)]
        dist.all_gather(gathered, torch.full((3,), float(rank), device=device))
        out.append(("all_gather", all(torch.equal(g, torch.full((3,), float(r), device=device))
                                      for r, g in enumerate(gathered))))
        cpu = torch.ones(4)
        dist.all_reduce(cpu)  # CPU tensors still go to the CPU plugin
        out.append(("cpu beside cuda", torch.equal(cpu, torch.full((4,), float(world)))))
    stream.synchronize()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2).to(device),
                                                      device_ids=[rank])
    model(torch.randn(4, 8, device=device)).sum().backward()
    out.append(("ddp", all(p.grad is not None for p in model.parameters())))
    return [name for name, ok in out if not ok]


class Cuda(unittest.TestCase):
    def test_cuda_tensors_through_nccl(self):
        world = torch.cuda.device_count()
        results = run_ranks(on_the_gpu, world_size=world, timeout_s=120)
        self.assertEqual({r: v for r, v in results.items() if v}, {})


if __name__ == "__main__":
    reason = why_not()
    if reason:
        print(f"SKIP: {reason}")
        sys.exit(SKIP)
    unittest.main()
