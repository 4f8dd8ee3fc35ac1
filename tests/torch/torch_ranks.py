"""Ranks as processes for the tests of integrations/torch.

    def body(rank, world_size):           # runs in each rank, after init_process_group
        ...
        return something_picklable
    results = run_ranks(body, world_size=3, env={"PROCGROUP_BACKEND": "ucx"})

Each rank is a fresh interpreter (multiprocessing "spawn"), imports procgroup_torch and
joins the default group "procgroup" through a FileStore in a private directory, so tests
run in parallel without ports. A rank's exception fails the run with its traceback; a rank
still running at the deadline is killed and named. init=False leaves
init_process_group to the body (for tests of its failures).
"""
import datetime
import multiprocessing
import os
import queue as queue_module
import shutil
import tempfile
import time
import traceback


def _rank_main(body, rank, world_size, init_file, env, timeout_s, init, results, args):
    os.environ.update(env)
    try:
        import torch.distributed as dist
        import procgroup_torch  # noqa: F401  (registers the backend)

        if init:
            dist.init_process_group("procgroup", init_method="file://" + init_file, rank=rank,
                                    world_size=world_size,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        value = body(rank, world_size, *args)
        if init:
            dist.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:  # noqa: B902  (everything goes back to the test)
        results.put((rank, False, traceback.format_exc()))


def run_ranks(body, world_size=2, env=None, timeout_s=60, init=True, args=(),
              expect_dead=()):
    """Runs body in world_size ranks; returns {rank: value}. Ranks in expect_dead may die
    without reporting (tests that kill a rank)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workdir = tempfile.mkdtemp(prefix="pg-torch-")
    env = dict(env or {})
    env.setdefault("PROCGROUP_TIMEOUT", str(timeout_s))
    processes = [
        context.Process(target=_rank_main,
                        args=(body, r, world_size, os.path.join(workdir, "store"), env,
                              timeout_s, init, results, args))
        for r in range(world_size)
    ]
    try:
        for p in processes:
            p.start()
        deadline = time.monotonic() + timeout_s + 30
        reported = {}
        while len(reported) < world_size and time.monotonic() < deadline:
            alive = [r for r, p in enumerate(processes) if p.is_alive()]
            if not alive and results.empty():
                break
            try:
                rank, ok, value = results.get(timeout=0.2)
                reported[rank] = (ok, value)
            except queue_module.Empty:
                pass
        failures = []
        for rank, p in enumerate(processes):
            if rank in reported or rank in expect_dead:
                continue
            p.join(timeout=1)
            if p.is_alive():
                failures.append(f"rank {rank}: still running after {timeout_s + 30} s (hang)")
            else:
                failures.append(f"rank {rank}: exited with code {p.exitcode} without reporting")
        failures += [f"rank {r}:\n{v}" for r, (ok, v) in sorted(reported.items()) if not ok]
        if failures:
            raise AssertionError("\n".join(failures))
        return {r: v for r, (ok, v) in reported.items()}
    finally:
        for p in processes:
            if p.is_alive():
                p.kill()
            p.join(timeout=5)
        shutil.rmtree(workdir, ignore_errors=True)
