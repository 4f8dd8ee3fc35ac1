#!/usr/bin/python3
"""torch DistributedDataParallel and dist.all_reduce: torch's gloo against procgroup.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ddp.py            # about 100 s
    PYTHONPATH=build/python /usr/bin/python3 bench/torch_ddp.py --quick    # about 10 s

Two ranks on this host (processes started here, rendezvous through a file:// store), three
configurations in the same run: torch's own gloo, procgroup_torch over procgroup's gloo
plugin and over its ucx plugin (PROCGROUP_BACKEND). Each repetition starts every
configuration's two ranks afresh, in a rotating order, and each rank then measures:

  1. DDP: torch.nn.parallel.DistributedDataParallel with its defaults on an MLP
     784-512-BN-256-BN-10, cross-entropy, SGD, batch --batch per rank on synthetic data made
     once from --seed; warm-up steps, then timed steps split into forward, backward and
     optimizer step. With the default bucket sizes (25 MiB cap, 1 MiB first bucket) the
     model's 537,354 gradients (2.1 MB) form one bucket, so a step communicates one 2.1 MB
     allreduce (at the end of backward, through its future) and, in forward, the BatchNorm
     buffers (broadcast_buffers=True: two small broadcasts, float32 and int64).
  2. The same DDP model inside no_sync(): no gradient allreduce, and no buffer broadcast after
     the first step (torch 1.13 broadcasts buffers only while gradients are synchronised).
  3. The same model without DDP: the step with no communication and no DDP bookkeeping.
  4. A sweep of blocking dist.all_reduce (float32, SUM, in place) over --sizes.

Figures are medians over --repeats repetitions; per repetition the slower rank's time.
The parent also times torch's copy_ (one thread) at 1 MiB and 64 MiB between repetitions as
the machine's memory reference, and --json FILE keeps every rank's raw figures. Exit status 1
when any configuration fails, or when a result is wrong: an all_reduce gives a wrong sum, or
the ranks' parameters after DDP differ from each other or from torch's gloo run (with two
ranks every sum is a + b, so all three must agree bit for bit).
"""

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

# Each configuration: the torch.distributed backend name and the procgroup plugin (None: torch's
# own backend, procgroup_torch is not even imported).
CONFIGS = {
    "torch-gloo": ("gloo", None),
    "procgroup-gloo": ("procgroup", "gloo"),
    "procgroup-ucx": ("procgroup", "ucx"),
}
REFERENCE = "torch-gloo"
WORLD = 2
DEFAULT_SIZES = "8,64,256,1K,4K,16K,64K,256K,1M,4M,16M,64M"
QUICK_SIZES = "8,64K,1M"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def format_size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


# ---- One rank ----------------------------------------------------------------------------


def make_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Linear(784, 512), nn.BatchNorm1d(512), nn.ReLU(),
        nn.Linear(512, 256), nn.BatchNorm1d(256), nn.ReLU(),
        nn.Linear(256, 10))


def state_digest(torch, module):
    """A hash of every parameter, bit for bit (not the buffers: BatchNorm's running statistics
    are each rank's own after the last forward, as DDP broadcasts them before it)."""
    flat = torch.cat([p.detach().reshape(-1).double() for p in module.parameters()])
    return hashlib.sha1(flat.numpy().tobytes()).hexdigest()[:16]


def context_switches():
    """Voluntary + involuntary context switches of this process's threads so far (Linux)."""
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:
            pass  # the thread ended meanwhile
    return total


def time_steps(torch, model, optimizer, batches, warmup, steps, sync=None):
    """Runs warmup + steps SGD steps; returns per timed step: ms in total, in forward, in
    backward, in the optimizer step, ms of CPU time of the whole process (every thread) and the
    number of context switches (every thread)."""
    loss_fn = torch.nn.CrossEntropyLoss()
    clock = time.perf_counter
    split = [0.0, 0.0, 0.0]
    begin = cpu_begin = switches_begin = None
    for i in range(warmup + steps):
        if i == warmup:
            split = [0.0, 0.0, 0.0]
            switches_begin = context_switches()
            cpu_begin = time.process_time()
            begin = clock()
        x, y = batches[i % len(batches)]
        t0 = clock()
        optimizer.zero_grad(set_to_none=True)
        with sync() if sync is not None else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
            t1 = clock()
            loss.backward()
        t2 = clock()
        optimizer.step()
        t3 = clock()
        split[0] += t1 - t0
        split[1] += t2 - t1
        split[2] += t3 - t2
    total = clock() - begin
    cpu = time.process_time() - cpu_begin
    switches = context_switches() - switches_begin
    if not torch.isfinite(loss).item():
        raise RuntimeError(f"the loss is {loss.item()} after {warmup + steps} steps")
    return ([1e3 * total / steps] + [1e3 * s / steps for s in split] +
            [1e3 * cpu / steps, switches / steps])


def run_rank(spec):
    """One rank of one configuration; prints one line "RESULT <json>"."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    backend, plugin = CONFIGS[spec["config"]]
    if plugin is not None:
        import procgroup_torch  # noqa: F401  registers "procgroup"
    rank = spec["rank"]
    dist.init_process_group(backend, init_method=spec["init"], rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=spec["op_timeout"]))
    out = {"rank": rank}

    # Synthetic data, made once: a pool of batches per rank, cycled through.
    gen = torch.Generator().manual_seed(spec["seed"] * 1000 + rank)
    batches = [(torch.randn(spec["batch"], 784, generator=gen),
                torch.randint(0, 10, (spec["batch"],), generator=gen)) for _ in range(16)]
    warmup, steps, lr = spec["warmup"], spec["steps"], 0.05

    torch.manual_seed(spec["seed"])
    model = DistributedDataParallel(make_model(torch))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    dist.barrier()
    out["ddp"] = time_steps(torch, model, opt, batches, warmup, steps)
    out["digest"] = state_digest(torch, model.module)
    dist.barrier()
    out["no_sync"] = time_steps(torch, model, opt, batches, warmup, steps, sync=model.no_sync)

    torch.manual_seed(spec["seed"])
    local = make_model(torch)
    local_opt = torch.optim.SGD(local.parameters(), lr=lr)
    dist.barrier()
    out["local"] = time_steps(torch, local, local_opt, batches, warmup, steps)

    # Blocking all_reduce; every size checked once (sum of rank + 1), then timed on zeros so
    # the values stay finite and ordinary.
    sweep = {}
    expected = WORLD * (WORLD + 1) / 2
    for size in spec["sizes"]:
        n = max(1, size // 4)
        t = torch.full((n,), float(rank + 1))
        dist.all_reduce(t)
        if not bool((t == expected).all()):
            bad = int((t != expected).nonzero()[0])
            raise RuntimeError(f"all_reduce of {size} B: element {bad} is {t[bad].item()}, "
                               f"expected {expected}")
        t.zero_()
        iters = max(spec["min_iters"], min(spec["max_iters"], spec["budget"] // max(size, 1)))
        for _ in range(max(2, iters // 10)):
            dist.all_reduce(t)
        dist.barrier()
        begin = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        sweep[str(size)] = [1e6 * (time.perf_counter() - begin) / iters, iters]
    out["sweep"] = sweep
    dist.barrier()
    dist.destroy_process_group()
    print("RESULT " + json.dumps(out), flush=True)


# ---- The parent: start ranks, collect, print ---------------------------------------------


def start_config(args, config, spec_base, workdir, round_no):
    """Runs one configuration's two ranks to the end; returns (per-rank results, error)."""
    init = "file://" + os.path.join(workdir, f"store-{config}-{round_no}")
    env = dict(os.environ)
    env.pop("PROCGROUP_BACKEND", None)
    if CONFIGS[config][1] is not None:
        env["PROCGROUP_BACKEND"] = CONFIGS[config][1]
    specs = [dict(spec_base, config=config, rank=rank, init=init) for rank in range(WORLD)]
    return run_ranks(os.path.abspath(__file__), specs, env, args.run_timeout,
                     os.path.join(workdir, f"{config}-{round_no}"))


def run_ranks(script, specs, env, run_timeout, log_prefix):
    """Runs `script --rank-spec <spec>` once per spec (one process per rank, one intra-op
    thread each) to the end; returns (each rank's "RESULT <json>" as a dict, None) or
    (None, what went wrong with the ranks' last output)."""
    procs = []
    for spec in specs:
        log = open(f"{log_prefix}-rank{spec['rank']}.log", "w+")
        procs.append((subprocess.Popen([sys.executable, script, "--rank-spec", json.dumps(spec)],
                                       env=dict(env, OMP_NUM_THREADS="1"), stdout=log,
                                       stderr=subprocess.STDOUT), log))
    # Until all exit, the time limit passes, or 10 s after one failed (the others may wait
    # for it until the operation timeout).
    deadline = time.monotonic() + run_timeout
    error = None
    while any(proc.poll() is None for proc, _ in procs):
        if any(proc.poll() not in (None, 0) for proc, _ in procs):
            deadline = min(deadline, time.monotonic() + 10)
        if time.monotonic() > deadline:
            error = f"did not finish within {run_timeout} s"
            break
        time.sleep(0.05)
    for proc, _ in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    results = []
    for rank, (proc, log) in enumerate(procs):
        log.seek(0)
        text = log.read()
        log.close()
        lines = [l for l in text.splitlines() if l.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            tail = "\n".join("    " + l for l in text.strip().splitlines()[-15:])
            error = (error or f"rank {rank} exited with {proc.returncode}") + \
                f"\n  rank {rank}'s last output:\n{tail}"
            continue
        results.append(json.loads(lines[-1][len("RESULT "):]))
    return (None, error) if error else (results, None)


def memcpy_rates(torch):
    """GB/s of one thread's torch copy_ (bytes copied per second) at 1 MiB and 64 MiB."""
    torch.set_num_threads(1)
    rates = {}
    for size in (1 << 20, 64 << 20):
        src = torch.ones(size // 4)
        dst = torch.empty_like(src)
        dst.copy_(src)
        iters = max(5, (512 << 20) // size)
        times = []
        for _ in range(3):
            begin = time.perf_counter()
            for _ in range(iters):
                dst.copy_(src)
            times.append((time.perf_counter() - begin) / iters)
        rates[size] = size / statistics.median(times) / 1e9
    return rates


def load_text():
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def spread(values):
    """median, min, max"""
    return statistics.median(values), min(values), max(values)


def print_table(header, rows, markdown, right=None):
    """Plain text with aligned columns, or a Markdown table."""
    right = right if right is not None else [i > 0 for i in range(len(header))]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---:" if r else "---" for r in right) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    for i, row in enumerate([header] + rows):
        print("  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)))
        if i == 0:
            print("-" * (sum(widths) + 2 * (len(widths) - 1)))


def print_report(args, runs, copies, loads):
    configs = list(runs)
    reps = len(next(iter(runs.values())))
    samples = args.batch * WORLD

    # DDP: per repetition the slower rank, then median (and range) over repetitions.
    step = {}
    for config, config_runs in runs.items():
        step[config] = {}
        for phase in ("ddp", "no_sync", "local"):
            per_rep = [max((r[phase] for r in rep), key=lambda v: v[0]) for rep in config_runs]
            step[config][phase] = [spread([v[i] for v in per_rep]) for i in range(6)]
    print(f"\nDDP training step: medians of {reps} repetition(s) of {args.warmup} warm-up + "
          f"{args.steps} timed steps; batch {args.batch} per rank ({samples} per step)\n")
    ref = step.get(REFERENCE, {}).get("ddp")
    rows = []
    for config, s in step.items():
        ddp, local = s["ddp"], s["local"]
        rate = 1e3 * samples / ddp[0][0]
        rows.append([
            config, f"{ddp[0][0]:.2f} ({ddp[0][1]:.2f}..{ddp[0][2]:.2f})", f"{rate:.0f}",
            f"{ref[0][0] / ddp[0][0]:.2f}" if ref else "-",
            f"{ddp[1][0]:.2f} / {ddp[2][0]:.2f} / {ddp[3][0]:.2f}",
            f"{s['no_sync'][0][0]:.2f}", f"{local[0][0]:.2f}",
            f"{local[1][0]:.2f} / {local[2][0]:.2f} / {local[3][0]:.2f}",
            f"{ddp[0][0] - local[0][0]:.2f} ({ddp[1][0] - local[1][0]:.2f} + "
            f"{ddp[2][0] - local[2][0]:.2f})",
            f"{ddp[4][0]:.2f} ({local[4][0]:.2f})", f"{ddp[5][0]:.1f} ({local[5][0]:.1f})"])
    print_table(["configuration", "ms/step (min..max)", "samples/s", "vs torch-gloo",
                 "fwd / bwd / opt", "no_sync", "no DDP", "fwd / bwd / opt", "DDP cost (fwd + bwd)",
                 "CPU ms", "switches"], rows, args.markdown)
    print("\n  ms per step. fwd / bwd / opt: forward (DDP's buffer broadcast happens here),")
    print("  backward (its gradient allreduce, waited for at the end) and optimizer step; no_sync:")
    print("  the DDP model inside no_sync() (no communication); no DDP: the plain model, then its")
    print("  split; DDP cost = ms/step - no DDP, split into forward and backward. vs torch-gloo:")
    print("  samples/s over torch-gloo's. CPU ms, switches: CPU time of the rank's process (all")
    print("  threads) and its threads' context switches per DDP step (per plain step).")

    if args.size_list:
        print(f"\nBlocking dist.all_reduce, float32 SUM in place: us per call, the slower rank's, "
              f"median (min..max) of {reps} repetition(s)\n")
        rows = []
        for size in args.size_list:
            times = {c: spread([max(r["sweep"][str(size)][0] for r in rep) for rep in runs[c]])
                     for c in configs}
            row = [format_size(size)]
            row += [f"{times[c][0]:.1f} ({times[c][1]:.1f}..{times[c][2]:.1f})" for c in configs]
            ref_t = times.get(REFERENCE)
            row += [f"{ref_t[0] / times[c][0]:.2f}" for c in configs if ref_t and c != REFERENCE]
            row += [f"{size / times[c][0] / 1e3:.2f}" for c in configs]
            rows.append(row)
        header = ["size"] + [f"{c} us" for c in configs]
        header += [f"{c} /ref" for c in configs if REFERENCE in runs and c != REFERENCE]
        header += [f"{c} GB/s" for c in configs]
        print_table(header, rows, args.markdown)
        print("\n  /ref: torch-gloo's time / this time (above 1: faster than torch's gloo);")
        print("  GB/s: size / time (algbw, which equals busbw at 2 ranks).")
    if copies:
        c1 = statistics.median(c[1 << 20] for c in copies)
        c64 = statistics.median(c[64 << 20] for c in copies)
        print(f"\nMemory reference: one thread's torch copy_ moves {c1:.1f} GB/s at 1 MiB and "
              f"{c64:.1f} GB/s at 64 MiB (bytes\n  copied per second, median of {len(copies)}).")
    print(f"\nLoad average (1, 5, 15 min) before the run: {loads[0]}; after it: {loads[-1]} "
          f"(this\n  benchmark's own two ranks add up to 2 while they run).")


def parse_configs(parser, text):
    """The configurations of a --configs list, or a parser error naming the unknown ones."""
    configs = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        parser.error(f"unknown configuration(s) {unknown}; choose from {', '.join(CONFIGS)}")
    return configs


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, help="timed training steps (default 200; quick 10)")
    p.add_argument("--warmup", type=int, help="untimed steps before them (default 30; quick 3)")
    p.add_argument("--repeats", type=int, help="repetitions; figures are medians (default 3; "
                   "quick 1)")
    p.add_argument("--sizes", help=f"all_reduce sizes in bytes, K/M suffixes; '' skips the "
                   f"sweep (default {DEFAULT_SIZES}; quick {QUICK_SIZES})")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"comma list of {', '.join(CONFIGS)} (default: all)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step (64)")
    p.add_argument("--seed", type=int, default=1, help="seed of data and model (1)")
    p.add_argument("--quick", action="store_true",
                   help="a small bounded run (the ctest smoke test)")
    p.add_argument("--op-timeout", type=int, default=60,
                   help="seconds any collective may take (init_process_group timeout; 60)")
    p.add_argument("--run-timeout", type=int,
                   help="seconds one configuration's ranks may run (default 300; quick 30)")
    p.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    p.add_argument("--json", metavar="FILE", help="also write every rank's raw figures to FILE")
    p.add_argument("--rank-spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.rank_spec:
        return args
    quick = args.quick
    args.steps = args.steps if args.steps is not None else (10 if quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (3 if quick else 30)
    args.repeats = args.repeats if args.repeats is not None else (1 if quick else 3)
    args.run_timeout = args.run_timeout or (30 if quick else 300)
    sizes = args.sizes if args.sizes is not None else (QUICK_SIZES if quick else DEFAULT_SIZES)
    args.size_list = [parse_size(s) for s in sizes.split(",") if s.strip()]
    args.config_list = parse_configs(p, args.configs)
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--steps and --repeats must be at least 1, --warmup at least 0")
    return args


def main(argv):
    args = parse_args(argv)
    if args.rank_spec:
        run_rank(json.loads(args.rank_spec))
        return 0

    import importlib.util
    import torch
    configs = args.config_list
    if any(CONFIGS[c][1] for c in configs) and importlib.util.find_spec("procgroup_torch") is None:
        print("torch_ddp.py: procgroup_torch is not importable; set PYTHONPATH=<build>/python",
              file=sys.stderr)
        return 1
    spec_base = {
        "seed": args.seed, "batch": args.batch, "warmup": args.warmup, "steps": args.steps,
        "sizes": args.size_list, "op_timeout": args.op_timeout,
        "min_iters": 3 if args.quick else 5, "max_iters": 20 if args.quick else 500,
        "budget": (16 << 20) if args.quick else (512 << 20),
    }
    print("torch DDP and dist.all_reduce: torch's gloo against procgroup, "
          f"{WORLD} ranks on this host, one process each")
    print(f"  command: {' '.join([sys.executable] + sys.argv)}")
    print(f"  torch {torch.__version__}, {os.cpu_count()} CPUs, 1 intra-op thread per rank; "
          f"configurations: {', '.join(configs)}")
    print("  same mode on every side: blocking all_reduce (async_op=False); DDP with default"
          "\n  bucket sizes (25 MiB cap, 1 MiB first: one 2.1 MB bucket here) and "
          "broadcast_buffers=True;\n  the same model, data and seed")
    sys.stdout.flush()

    runs = {c: [] for c in configs}
    errors = {}
    copies = []
    loads = [load_text()]
    digests = {}
    with tempfile.TemporaryDirectory(prefix="torch_ddp.") as workdir:
        for round_no in range(args.repeats):
            order = configs[round_no % len(configs):] + configs[:round_no % len(configs)]
            for config in order:
                if config in errors:
                    continue
                begin = time.monotonic()
                results, error = start_config(args, config, spec_base, workdir, round_no)
                if error:
                    errors[config] = error
                    print(f"  {config}: FAILED (details at the end)", file=sys.stderr)
                    continue
                runs[config].append(results)
                ranks_digests = {r["digest"] for r in results}
                digests.setdefault(config, set()).update(ranks_digests)
                print(f"  repetition {round_no + 1}/{args.repeats}: {config} done in "
                      f"{time.monotonic() - begin:.1f} s", file=sys.stderr)
            copies.append(memcpy_rates(torch))
    loads.append(load_text())
    runs = {c: r for c, r in runs.items() if r}
    if runs:
        print_report(args, runs, copies, loads)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items() if k != "rank_spec"},
                       "runs": runs, "memcpy_gbps": copies, "load": loads}, f, indent=1)

    # Results: every rank of every configuration ends DDP with the same parameters, bit for
    # bit (the same seed, data and steps; a sum of two values does not depend on the order).
    status = 0
    print("\nChecks:")
    for config in configs:
        if config in errors:
            print(f"  {config}: FAILED: {errors[config]}")
            status = 1
        elif len(digests.get(config, ())) != 1:
            print(f"  {config}: WRONG: ranks ended DDP with different parameters "
                  f"({sorted(digests[config])})")
            status = 1
        else:
            note = ""
            if config != REFERENCE and REFERENCE in digests:
                same = digests[config] == digests[REFERENCE]
                note = "; equal to torch-gloo's" if same else "; DIFFERENT from torch-gloo's"
                status = status if same else 1
            print(f"  {config}: {'ok' if 'DIFF' not in note else 'WRONG'} (all_reduce sums "
                  f"right; the ranks' parameters after DDP equal{note})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
