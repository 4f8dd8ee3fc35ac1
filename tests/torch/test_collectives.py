"""Every torch collective over the "procgroup" backend, against a local reference that
each rank computes from every rank's known inputs, and against torch's own gloo backend
on the same inputs wherever gloo supports the call. PROCGROUP_BACKEND (the plugin under
test) comes from the environment; ctest runs this file once per plugin.

    PYTHONPATH=build/python PROCGROUP_BACKEND=ucx /usr/bin/python3 tests/torch/test_collectives.py
"""
import os
import unittest
import warnings

import torch
import torch.distributed as dist

import procgroup_torch
from torch_ranks import run_ranks

WORLD = int(os.environ.get("PG_TORCH_TEST_WORLD", "3"))
# Unset: procgroup picks its CPU default (ucx where it works on every rank, else gloo).
PLUGIN = os.environ.get("PROCGROUP_BACKEND")
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def inputs(rank, n, dtype, small=False):
    """Integer-valued, so every reduction order gives the same exact answer."""
    top = 3 if small else 11
    return ((torch.arange(n) * 7 + rank * 3) % top + 1).to(dtype)


def reference(op, tensors):
    acc = tensors[0].clone()
    for t in tensors[1:]:
        if op == dist.ReduceOp.SUM:
            acc = acc + t
        elif op == dist.ReduceOp.PRODUCT:
            acc = acc * t
        elif op == dist.ReduceOp.MIN:
            acc = torch.minimum(acc, t)
        elif op == dist.ReduceOp.MAX:
            acc = torch.maximum(acc, t)
    return acc.to(tensors[0].dtype)


class Checker:
    """Collects failures instead of stopping at the first, so one run reports them all."""

    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.compared_with_gloo = 0

    def same(self, what, got, want):
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append(f"rank {self.rank}: {what}: got {got.tolist()[:8]} "
                                 f"({got.dtype}, {tuple(got.shape)}), want "
                                 f"{want.tolist()[:8]} ({want.dtype}, {tuple(want.shape)})")

    def against_gloo(self, what, gloo_call, got):
        """The same call on torch's gloo group must agree (skipped where gloo refuses)."""
        try:
            want = gloo_call()
        except RuntimeError as e:
            if "does not support" in str(e) or "Unsupported" in str(e) or "Invalid" in str(e):
                return
            raise
        self.compared_with_gloo += 1
        self.same(what + " (vs torch gloo)", got, want)


def every_collective(rank, world):
    warnings.simplefilter("ignore")  # torch's deprecation notes for the calls tested here
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank)
    n = 37
    everyone = lambda dtype, small=False: [inputs(r, n, dtype, small) for r in range(world)]

    for dtype in DTYPES:
        for name in ["SUM", "PRODUCT", "MIN", "MAX"]:
            op = getattr(dist.ReduceOp, name)
            small = op == dist.ReduceOp.PRODUCT
            t = inputs(rank, n, dtype, small)
            dist.all_reduce(t, op=op)
            c.same(f"all_reduce {name} {dtype}", t, reference(op, everyone(dtype, small)))

            def gloo_all_reduce(dtype=dtype, op=op, small=small):
                g = inputs(rank, n, dtype, small)
                dist.all_reduce(g, op=op, group=gloo)
                return g
            c.against_gloo(f"all_reduce {name} {dtype}", gloo_all_reduce, t)
    for dtype in FLOATS:
        t = inputs(rank, n, dtype) * world
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        c.same(f"all_reduce AVG {dtype}", t, reference(dist.ReduceOp.SUM, everyone(dtype)))
    for size in [0, 1, 65537]:
        t = inputs(rank, size, torch.float32)
        dist.all_reduce(t)
        c.same(f"all_reduce of {size} elements", t,
               reference(dist.ReduceOp.SUM, [inputs(r, size, torch.float32) for r in range(world)]))

    a, b = inputs(rank, 5, torch.float32), inputs(rank, 3, torch.float32) + 1
    dist.all_reduce_coalesced([a, b])
    c.same("all_reduce_coalesced [0]", a,
           reference(dist.ReduceOp.SUM, [inputs(r, 5, torch.float32) for r in range(world)]))
    c.same("all_reduce_coalesced [1]", b,
           reference(dist.ReduceOp.SUM, [inputs(r, 3, torch.float32) + 1 for r in range(world)]))

    for dtype in [torch.float32, torch.int64, torch.bool, torch.complex64, torch.int16]:
        for root in range(world):
            t = inputs(rank, n, torch.int64).to(dtype)
            dist.broadcast(t, src=root)
            c.same(f"broadcast {dtype} from {root}", t, inputs(root, n, torch.int64).to(dtype))

    for dtype in [torch.float32, torch.int32, torch.bool]:
        outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, inputs(rank, n, torch.int64).to(dtype))
        want = torch.stack([inputs(r, n, torch.int64).to(dtype) for r in range(world)])
        c.same(f"all_gather {dtype}", torch.stack(outs), want)
        g_outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
        c.against_gloo(f"all_gather {dtype}", lambda: (dist.all_gather(
            g_outs, inputs(rank, n, torch.int64).to(dtype), group=gloo), torch.stack(g_outs))[1],
            torch.stack(outs))
    flat = torch.zeros(world * n)
    dist.all_gather_into_tensor(flat, inputs(rank, n, torch.float32))  # C++: _allgather_base
    c.same("all_gather_into_tensor", flat, torch.cat(everyone(torch.float32)))

    for name in ["SUM", "MAX"]:
        op = getattr(dist.ReduceOp, name)
        chunks = [inputs(rank, n, torch.float32) + j for j in range(world)]
        out = torch.zeros(n)
        dist.reduce_scatter(out, chunks, op=op)
        c.same(f"reduce_scatter {name}", out,
               reference(op, [inputs(r, n, torch.float32) + rank for r in range(world)]))
        out = torch.zeros(n)
        dist.reduce_scatter_tensor(out, torch.cat(chunks), op=op)  # C++: _reduce_scatter_base
        c.same(f"reduce_scatter_tensor {name}", out,
               reference(op, [inputs(r, n, torch.float32) + rank for r in range(world)]))

    for root in range(world):
        t = inputs(rank, n, torch.float64)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if rank == root:
            c.same(f"reduce to {root}", t, reference(dist.ReduceOp.SUM, everyone(torch.float64)))

    root = world - 1
    gathered = [torch.zeros(n, dtype=torch.int32) for _ in range(world)] if rank == root else None
    dist.gather(inputs(rank, n, torch.int32), gather_list=gathered, dst=root)
    if rank == root:
        c.same("gather", torch.stack(gathered), torch.stack(everyone(torch.int32)))
    out = torch.zeros(n, dtype=torch.int32)
    dist.scatter(out, scatter_list=everyone(torch.int32) if rank == root else None, src=root)
    c.same("scatter", out, inputs(rank, n, torch.int32))

    send = torch.arange(world * 4, dtype=torch.float32) + 100 * rank
    recv = torch.zeros(world * 4)
    dist.all_to_all_single(recv, send)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) + 100 * r
                      for r in range(world)])
    c.same("all_to_all_single", recv, want)
    g_recv = torch.zeros(world * 4)
    c.against_gloo("all_to_all_single",
                   lambda: (dist.all_to_all_single(g_recv, send, group=gloo), g_recv)[1], recv)
    recv = torch.zeros(world * 4)
    dist.all_to_all_single(recv, send, [4] * world, [4] * world)
    c.same("all_to_all_single with equal splits", recv, want)
    outs = [torch.zeros(4) for _ in range(world)]
    dist.all_to_all(outs, list(send.chunk(world)))
    c.same("all_to_all", torch.cat(outs), want)

    right, left = (rank + 1) % world, (rank - 1) % world
    mine = inputs(rank, n, torch.float32)
    got = torch.zeros(n)
    works = [dist.isend(mine, right, tag=3), dist.irecv(got, left, tag=3)]
    for w in works:
        w.wait()
    c.same("isend/irecv ring", got, inputs(left, n, torch.float32))
    if world >= 2:
        if rank == 0:
            dist.send(mine, 1)
        elif rank == 1:
            got = torch.zeros(n)
            dist.recv(got, 0)
            c.same("send/recv", got, inputs(0, n, torch.float32))

    t = inputs(rank, n, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda f: f.value()[0] * 2).wait()
    c.same("future then", doubled, reference(dist.ReduceOp.SUM, everyone(torch.float32)) * 2)
    if not work.is_completed():
        c.failures.append(f"rank {rank}: a work whose future completed is not completed")

    dist.barrier()

    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank, "name": f"r{rank}"})
    if objects != [{"rank": r, "name": f"r{r}"} for r in range(world)]:
        c.failures.append(f"rank {rank}: all_gather_object gave {objects}")
    box = [{"from": "root", "list": [1, 2, 3]}, "text"] if rank == 0 else [None, None]
    dist.broadcast_object_list(box, src=0)
    if box != [{"from": "root", "list": [1, 2, 3]}, "text"]:
        c.failures.append(f"rank {rank}: broadcast_object_list gave {box}")
    collected = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), collected, dst=0)
    if rank == 0 and collected != [("r", r) for r in range(world)]:
        c.failures.append(f"rank 0: gather_object gave {collected}")
    got = [None]
    dist.scatter_object_list(got, [f"to {r}" for r in range(world)] if rank == 0 else None,
                             src=0)
    if got != [f"to {rank}"]:
        c.failures.append(f"rank {rank}: scatter_object_list gave {got}")

    ends = [0, world - 1]
    sub = dist.new_group(ends)
    if rank in ends:
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=sub)
        c.same("new_group([0, last]) all_reduce", t, torch.tensor([float(world - 1)]))
        if dist.get_world_size(sub) != 2 or dist.get_rank(sub) != ends.index(rank):
            c.failures.append(f"rank {rank}: subgroup rank/size wrong")

    expected = PLUGIN or procgroup_torch.plugin()  # unset: whichever the default chose
    if dist.get_backend() != "procgroup" or procgroup_torch.plugin() != expected:
        c.failures.append(f"rank {rank}: backend {dist.get_backend()}, plugin "
                          f"{procgroup_torch.plugin()}, expected procgroup over {expected}")
    return c.failures, c.compared_with_gloo


def coalesced_calls(rank, world):
    """Calls procgroup runs as one operation per tensor under one work: all_gather_coalesced
    (blocking, and its future), and on torch >= 2 the _coalescing_manager's calls."""
    warnings.simplefilter("ignore")  # all_gather_coalesced's deprecation note
    c = Checker(rank)
    sizes = [5, 1, 9]
    mine = [inputs(rank, k, torch.float32) + i for i, k in enumerate(sizes)]
    want = [[inputs(r, k, torch.float32) + i for i, k in enumerate(sizes)] for r in range(world)]
    outs = [[torch.zeros(k) for k in sizes] for _ in range(world)]
    dist.all_gather_coalesced(outs, mine)
    for r in range(world):
        for i in range(len(sizes)):
            c.same(f"all_gather_coalesced [rank {r}][{i}]", outs[r][i], want[r][i])
    outs = [[torch.zeros(k) for k in sizes] for _ in range(world)]
    values = dist.all_gather_coalesced(outs, mine, async_op=True).wait()
    c.same("all_gather_coalesced future", torch.cat(values),
           torch.cat([want[r][i] for i in range(len(sizes)) for r in range(world)]))
    try:
        dist.all_gather_coalesced([[torch.zeros(2)]] * world, [torch.zeros(3)])
        c.failures.append(f"rank {rank}: all_gather_coalesced of mismatched sizes was accepted")
    except RuntimeError as e:
        if "procgroup allgather_coalesced" not in str(e):
            c.failures.append(f"rank {rank}: all_gather_coalesced refusal said: {e}")

    if int(torch.__version__.split(".")[0]) >= 2:
        a, b = inputs(rank, 5, torch.float32), inputs(rank, 7, torch.float32)
        with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
            dist.all_reduce(a)
            dist.all_reduce(b)
        cm.wait()
        c.same("_coalescing_manager all_reduce [0]", a,
               reference(dist.ReduceOp.SUM, [inputs(r, 5, torch.float32) for r in range(world)]))
        c.same("_coalescing_manager all_reduce [1]", b,
               reference(dist.ReduceOp.SUM, [inputs(r, 7, torch.float32) for r in range(world)]))
        flats = [torch.zeros(world * k) for k in sizes]
        with dist._coalescing_manager():
            for flat, t in zip(flats, mine):
                dist.all_gather_into_tensor(flat, t)
        for i, flat in enumerate(flats):
            c.same(f"_coalescing_manager all_gather_into_tensor [{i}]", flat,
                   torch.cat([want[r][i] for r in range(world)]))
        outs = [torch.zeros(k) for k in sizes]
        with dist._coalescing_manager():
            for out, k in zip(outs, sizes):
                dist.reduce_scatter_tensor(out, torch.cat([inputs(rank, k, torch.float32)] * world))
        for out, k in zip(outs, sizes):
            c.same(f"_coalescing_manager reduce_scatter_tensor of {k}", out,
                   reference(dist.ReduceOp.SUM, [inputs(r, k, torch.float32) for r in range(world)]))
        t = inputs(rank, 4, torch.float32)
        with dist._coalescing_manager(device=torch.device("cpu")):
            dist.broadcast(t, src=0)  # no fast path: start/endCoalescing around it
        c.same("_coalescing_manager broadcast", t, inputs(0, 4, torch.float32))
    return c.failures


def poll_while_the_completer_waits(rank, world):
    """is_completed() answers at once while the future's completer thread waits."""
    import time
    t = torch.ones(4)
    if rank != 0:
        time.sleep(1.5)  # joins late
        dist.all_reduce(t)
        return None
    work = dist.all_reduce(t, async_op=True)
    future = work.get_future()
    time.sleep(0.1)
    start = time.monotonic()
    early = work.is_completed()
    took = time.monotonic() - start
    future.wait()
    return early, took, work.is_completed(), t.tolist()


class EveryCollective(unittest.TestCase):
    def test_is_completed_does_not_block_while_a_future_is_pending(self):
        early, took, late, values = run_ranks(poll_while_the_completer_waits, world_size=2)[0]
        self.assertFalse(early)
        self.assertLess(took, 0.05, f"is_completed() took {took:.3f} s")
        self.assertTrue(late)
        self.assertEqual(values, [2.0] * 4)

    def test_coalesced_calls_match_the_reference(self):
        results = run_ranks(coalesced_calls, world_size=WORLD, timeout_s=60)
        failures = [f for r in sorted(results) for f in results[r]]
        self.assertEqual(failures, [], "\n".join(failures))

    def test_every_collective_matches_the_reference_and_torch_gloo(self):
        results = run_ranks(every_collective, world_size=WORLD, timeout_s=120)
        failures = [f for r in sorted(results) for f in results[r][0]]
        self.assertEqual(failures, [], "\n".join(failures))
        # The comparison with torch's gloo really ran (dtypes and calls gloo supports).
        self.assertGreater(results[0][1], 20)
        print(f"{WORLD} ranks over procgroup+{PLUGIN or 'its default plugin'}: every check passed; "
              f"{results[0][1]} calls also compared with torch's gloo")


if __name__ == "__main__":
    unittest.main()
