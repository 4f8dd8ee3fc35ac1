"""What a torch user gets when something is wrong: a RuntimeError (or NotImplementedError)
carrying procgroup's words, never a crash, a hang or a wrong answer.

    PYTHONPATH=build/python /usr/bin/python3 tests/torch/test_failures.py
"""
import datetime
import os
import signal
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

from torch_ranks import run_ranks


def raised(call):
    try:
        call()
    except Exception as e:  # noqa: B902  (the test reports which kind)
        return type(e).__name__, str(e).splitlines()[0]
    return None, None


def init_with_backend(rank, world, backend):
    os.environ["PROCGROUP_BACKEND"] = backend
    store = tempfile.mkdtemp(prefix=f"pg-torch-bad-{world}-")  # private per rank: never used
    return raised(lambda: dist.init_process_group(
        "procgroup", init_method=f"file://{store}/s", rank=0, world_size=1))


def bad_calls(rank, world):
    pg_world = dist.group.WORLD
    out = {}
    out["non-contiguous"] = raised(lambda: dist.all_reduce(torch.ones(4, 4).t()))
    out["BAND"] = raised(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                                 op=dist.ReduceOp.BAND))
    out["sum of int16"] = raised(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)))
    out["unequal splits"] = raised(lambda: dist.all_to_all_single(
        torch.zeros(3), torch.zeros(3), [1, 2], [2, 1]))
    out["two tensors"] = raised(lambda: pg_world.allreduce([torch.ones(2), torch.ones(2)]))
    out["bad root"] = raised(lambda: dist.broadcast(torch.ones(2), src=world + 3))
    # The group still works after refused calls: nothing was sent.
    t = torch.ones(2)
    dist.all_reduce(t)
    out["after"] = t.tolist()
    # Ranks that disagree on the dtype: PG_ERR_MISMATCH on every rank (gloo plugin: found by
    # the hang report at the group timeout, hence the short timeout of this test).
    dtype = torch.float32 if rank == 0 else torch.int32
    out["dtype mismatch"] = raised(lambda: dist.all_reduce(torch.ones(8, dtype=dtype)))
    return out


def per_call_timeout(rank, world):
    if rank == 1:
        time.sleep(4)  # never joins rank 0's allreduce
        return None
    opts = dist.AllreduceOptions()
    opts.timeout = datetime.timedelta(seconds=1)
    start = time.monotonic()
    kind, message = raised(lambda: dist.group.WORLD.allreduce([torch.ones(4)], opts).wait())
    return kind, message, time.monotonic() - start


def killed_mid_allreduce(rank, world):
    big = torch.ones(4 << 20)
    for _ in range(3):
        dist.all_reduce(big)
    if rank == 1:
        dist.all_reduce(big, async_op=True)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    kind, message = raised(lambda: [dist.all_reduce(big) for _ in range(50)])
    return kind, message, time.monotonic() - start


class Failures(unittest.TestCase):
    def test_unknown_backend_and_unloadable_plugin(self):
        with tempfile.NamedTemporaryFile(suffix=".so") as not_a_plugin:
            not_a_plugin.write(b"not an ELF file")
            not_a_plugin.flush()
            for backend in ["no_such_backend", not_a_plugin.name]:
                kind, message = run_ranks(init_with_backend, world_size=1, init=False,
                                          args=(backend,))[0]
                self.assertEqual(kind, "RuntimeError", message)
                self.assertIn("PG_ERR_BACKEND_NOT_FOUND", message)
                self.assertIn(os.path.basename(backend), message)

    def test_bad_calls_raise_naming_the_call_and_leave_the_group_usable(self):
        results = run_ranks(bad_calls, world_size=2, timeout_s=5,
                            env={"PROCGROUP_BACKEND": "gloo"})
        for rank, out in results.items():
            expect = {
                "non-contiguous": ("RuntimeError", "procgroup allreduce: tensors must be contiguous"),
                "BAND": ("NotImplementedError", "procgroup allreduce: reduce op BAND is not supported"),
                "sum of int16": ("RuntimeError", "procgroup allreduce: cannot reduce tensors of dtype Short"),
                "unequal splits": ("NotImplementedError", "procgroup alltoall_base: only equal splits"),
                "two tensors": ("RuntimeError", "procgroup allreduce: takes one tensor per call, got 2"),
                "bad root": ("RuntimeError", "procgroup broadcast: rank 5 is outside this group of 2"),
                "dtype mismatch": ("RuntimeError", "procgroup allreduce: PG_ERR_"),
            }
            for case, (kind, start) in expect.items():
                got_kind, got_message = out[case]
                self.assertEqual(got_kind, kind, f"rank {rank} {case}: {got_message}")
                self.assertIn(start, got_message or "", f"rank {rank} {case}")
            self.assertEqual(out["after"], [2.0, 2.0])
        # Gloo closes the pairs of the first rank that times out, so a rank entering tens of
        # ms later may report PEER_LOST instead (docs/reliability.md); one rank names it.
        said = [results[r]["dtype mismatch"][1] for r in results]
        self.assertTrue(any("PG_ERR_MISMATCH" in m and "different arguments" in m for m in said),
                        said)

    def test_per_call_timeout(self):
        for plugin in ["gloo", "ucx"]:
            kind, message, seconds = run_ranks(per_call_timeout, world_size=2,
                                               env={"PROCGROUP_BACKEND": plugin})[0]
            self.assertEqual(kind, "RuntimeError", message)
            self.assertIn("PG_ERR_TIMEOUT", message)
            self.assertNotIn("group timeout", message)  # the call's timeout, not the group's
            # 1 s, then the hang report's gather window (1 s); far from the group's 60 s.
            self.assertLess(seconds, 8, f"{plugin}: the 1 s timeout took {seconds:.1f} s")

    def test_a_rank_killed_mid_allreduce_is_a_peer_lost_error_not_a_hang(self):
        for plugin in ["gloo", "ucx"]:
            results = run_ranks(killed_mid_allreduce, world_size=2, timeout_s=30,
                                env={"PROCGROUP_BACKEND": plugin}, expect_dead={1})
            kind, message, seconds = results[0]
            self.assertEqual(kind, "RuntimeError", f"{plugin}: {message}")
            self.assertIn("PG_ERR_PEER_LOST", message, plugin)
            self.assertLess(seconds, 15, f"{plugin}: {seconds:.1f} s")


if __name__ == "__main__":
    unittest.main()
