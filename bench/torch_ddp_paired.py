#!/usr/bin/python3
"""torch DDP over torch's gloo and over procgroup, paired: the same two processes, in turn.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ddp_paired.py            # about 1 min
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ddp_paired.py --quick    # about 5 s

bench/torch_ddp.py starts each configuration's ranks as fresh processes. On a 2-core VM the
step time of one and the same model then moves by ±10 % from one pair of processes to the
next (the plain model's step as much as DDP's), more than the gaps it is meant to show.
Here the two ranks host one DDP model per configuration, each over a process group of its
own: torch's gloo, and procgroup over its gloo plugin (and over ucx with --configs;
procgroup_torch reads PROCGROUP_BACKEND when a group is made). They train in turn:
--rounds rounds, in each every configuration runs --warmup + --steps steps, in an order
that rotates from round to round. A round's figure per configuration is the slower rank's
mean ms per step. The report gives samples/s over all timed steps and its ratio to torch's
gloo, and the median of the per-round ratios (both sides measured seconds apart, in the
same processes, on the same data). The model, batch and data are bench/torch_ddp.py's
(MLP 784-512-BN-256-BN-10, batch 64 per rank, one 2.1 MB gradient bucket, BatchNorm buffers
broadcast in forward). Exit status 1 when a configuration fails, or when the parameters
after training differ between ranks or from torch's gloo model, bit for bit.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ddp  # noqa: E402  the model, the timed steps, the rank launcher

CONFIGS, REFERENCE, WORLD = torch_ddp.CONFIGS, torch_ddp.REFERENCE, torch_ddp.WORLD


def rotated(items, by):
    by %= len(items)
    return items[by:] + items[:by]


def run_rank(spec):
    """One rank hosting every configuration; prints one line "RESULT <json>"."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    import procgroup_torch  # noqa: F401  registers "procgroup"

    torch.set_num_threads(1)
    rank, configs = spec["rank"], spec["configs"]
    timeout = timedelta(seconds=spec["op_timeout"])
    dist.init_process_group("gloo", init_method=spec["init"], rank=rank, world_size=WORLD,
                            timeout=timeout)
    gen = torch.Generator().manual_seed(spec["seed"] * 1000 + rank)
    batches = [(torch.randn(spec["batch"], 784, generator=gen),
                torch.randint(0, 10, (spec["batch"],), generator=gen)) for _ in range(16)]
    models, optimizers = {}, {}
    for config in configs:
        backend, plugin = CONFIGS[config]
        if plugin is not None:
            os.environ["PROCGROUP_BACKEND"] = plugin
        group = dist.new_group(backend=backend, timeout=timeout)
        torch.manual_seed(spec["seed"])
        models[config] = DistributedDataParallel(torch_ddp.make_model(torch),
                                                 process_group=group)
        optimizers[config] = torch.optim.SGD(models[config].parameters(), lr=0.05)
    rounds = {c: [] for c in configs}
    for round_no in range(spec["rounds"]):
        for config in rotated(configs, round_no):
            dist.barrier()
            rounds[config].append(torch_ddp.time_steps(torch, models[config], optimizers[config],
                                                       batches, spec["warmup"], spec["steps"]))
    digests = {c: torch_ddp.state_digest(torch, models[c].module) for c in configs}
    dist.barrier()
    dist.destroy_process_group()
    print("RESULT " + json.dumps({"rank": rank, "rounds": rounds, "digests": digests}),
          flush=True)


def report(args, results):
    """Prints the table; returns the exit status of the result checks."""
    configs = args.config_list
    # per configuration, per round: the slower rank's [ms/step, fwd, bwd, opt, cpu, switches]
    rounds = {c: [max((r["rounds"][c][i] for r in results), key=lambda v: v[0])
                  for i in range(args.rounds)] for c in configs}
    print(f"\nDDP training step, paired: {args.rounds} rounds, each {args.warmup} warm-up + "
          f"{args.steps} timed steps per configuration; batch {args.batch} per rank\n")
    rows = []
    for c in configs:
        step = [v[0] for v in rounds[c]]
        split = [statistics.median(v[i] for v in rounds[c]) for i in (1, 2, 3)]
        ratios = [r[0] / v[0] for r, v in zip(rounds[REFERENCE], rounds[c])]
        rows.append([c, f"{statistics.median(step):.2f} ({min(step):.2f}..{max(step):.2f})",
                     f"{1e3 * args.batch * WORLD * len(step) / sum(step):.0f}",
                     f"{sum(v[0] for v in rounds[REFERENCE]) / sum(step):.3f}",
                     f"{statistics.median(ratios):.3f} ({min(ratios):.2f}..{max(ratios):.2f})",
                     " / ".join(f"{x:.2f}" for x in split),
                     f"{statistics.median(v[4] for v in rounds[c]):.2f}",
                     f"{statistics.median(v[5] for v in rounds[c]):.1f}"])
    torch_ddp.print_table(["configuration", "ms/step (min..max)", "samples/s", "vs torch-gloo",
                           "per round (min..max)", "fwd / bwd / opt", "CPU ms", "switches"],
                          rows, args.markdown)
    print("\n  ms/step, fwd / bwd / opt, CPU ms, switches: medians over rounds (CPU time and")
    print("  context switches of the rank's process, all threads, per step); samples/s: over")
    print("  all timed steps; vs torch-gloo: samples/s over torch-gloo's; per round: the median")
    print("  (min..max) of each round's ratio, torch-gloo's ms/step over this one's.")
    print("\nChecks:")
    status = 0
    for c in configs:
        digests = {r["digests"][c] for r in results}
        same = digests == {r["digests"][REFERENCE] for r in results}
        ok = len(digests) == 1 and same
        status = status if ok else 1
        versus = "" if c == REFERENCE else "; equal to torch-gloo's" if same else \
            "; NOT torch-gloo's"
        print(f"  {c}: {'ok' if ok else 'WRONG'} (the ranks' parameters after training "
              f"{'equal' if len(digests) == 1 else 'DIFFER'}{versus})")
    return status


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, help="rounds (default 30; quick 2)")
    p.add_argument("--steps", type=int, help="timed steps per round and configuration "
                   "(default 50; quick 5)")
    p.add_argument("--warmup", type=int, help="untimed steps before them (default 5; quick 2)")
    p.add_argument("--configs", default="torch-gloo,procgroup-gloo",
                   help="comma list of " + ", ".join(CONFIGS) + " (default torch-gloo,"
                   "procgroup-gloo: ucx's memory hooks would then sit in every process)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step (64)")
    p.add_argument("--seed", type=int, default=1, help="seed of data and model (1)")
    p.add_argument("--quick", action="store_true", help="a small bounded run (ctest)")
    p.add_argument("--op-timeout", type=int, default=60, help="seconds any collective may take")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--json", metavar="FILE", help="also write every rank's raw figures to FILE")
    p.add_argument("--rank-spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rank_spec:
        return args
    pick = (lambda given, quick, full: given if given is not None else quick if args.quick
            else full)
    args.rounds = pick(args.rounds, 2, 30)
    args.steps = pick(args.steps, 5, 50)
    args.warmup = pick(args.warmup, 2, 5)
    args.config_list = torch_ddp.parse_configs(p, args.configs)
    if REFERENCE not in args.config_list:
        args.config_list.insert(0, REFERENCE)
    if len(set(args.config_list)) < 2:
        p.error(f"--configs: {REFERENCE} and at least one other of {', '.join(CONFIGS)}")
    if args.rounds < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--rounds and --steps must be at least 1, --warmup at least 0")
    return args


def main(argv):
    args = parse_args(argv)
    if args.rank_spec:
        run_rank(json.loads(args.rank_spec))
        return 0
    print(f"torch DDP, paired: {', '.join(args.config_list)} in the same {WORLD} processes, "
          f"in turn\n  command: {' '.join([sys.executable] + sys.argv)}\n  load average "
          f"before: {torch_ddp.load_text()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="torch_ddp_paired.") as workdir:
        spec = {"configs": args.config_list, "rounds": args.rounds, "steps": args.steps,
                "warmup": args.warmup, "batch": args.batch, "seed": args.seed,
                "op_timeout": args.op_timeout, "init": "file://" + os.path.join(workdir, "store")}
        budget = 60 + args.rounds * len(args.config_list) * (args.warmup + args.steps) * 0.2
        begin = time.monotonic()
        results, error = torch_ddp.run_ranks(
            os.path.abspath(__file__), [dict(spec, rank=r) for r in range(WORLD)],
            dict(os.environ), budget, os.path.join(workdir, "paired"))
    if error:
        print(f"torch_ddp_paired.py: FAILED: {error}", file=sys.stderr)
        return 1
    print(f"  ran {time.monotonic() - begin:.0f} s; load average after: {torch_ddp.load_text()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if k != "rank_spec"},
                       "ranks": results}, f, indent=1)
    return report(args, results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
