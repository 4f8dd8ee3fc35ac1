#!/usr/bin/env bash
# Everything still to verify on a GPU machine of the `device` tool (issues 13 and 15), as one
# call of at most about 9 minutes, each step bounded, logs written to $OUT/device_check as
# they come (so a run cut short still returns what it did). The GPU is timed while it is
# free; the CPU work runs beside it on the machine's other cores:
#   1. collbench -g cuda --direct, pipelined and blocking, 3 runs each (overhead vs raw
#      NCCL), first, with nothing beside it;
#   2. ctest -L gpu on the packed build, and the C++ c10d store client against torch 2.x's
#      own TCPStore and torchrun (ctest -R 'C10dTorch|TorchrunDefaultLaunch', through
#      /tmp/torch-python);
#   3. beside 1 and 2: the torch 2.x tests on CPU tensors (tests/torch/device_run.sh cpu:
#      collectives incl. _coalescing_manager, DDP, failures, torchrun, benchmark) and why
#      exceptions thrown by procgroup_torch crash torch 2.11 (device_exception_probe.sh);
#   4. the torch 2.x CUDA tests (device_run.sh cuda).
# Here, first (about 15 minutes on 2 cores):
#   git worktree add /tmp/wt-gpu HEAD && cmake -S /tmp/wt-gpu -B /tmp/wt-gpu/build \
#     -DPROCGROUP_WITH_TORCH=OFF -DPROCGROUP_TORCH_PYTHON=/tmp/torch-python -G Ninja &&
#     cmake --build /tmp/wt-gpu/build -j2
#   bash ../shared/tools/device_pack.sh /tmp/wt-gpu/build
# then run `bash scripts/device_check.sh` on the device with carry [".device"].
source .device/env.sh || exit 1   # before set -u: env.sh calls _pg_dir with one argument
set -u
out=${OUT:-/tmp}/device_check
mkdir -p "$out"
B=$PG_BUILD/bin
step() { echo "== $1 at $SECONDS s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# A clock source other than tsc makes every clock read a system call (per-op cost).
echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)" |
  tee -a "$out/gpu.txt"
# The tests built here name a torch Python by this path; the device's is the first on PATH.
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/torch-python
chmod +x /tmp/torch-python
# Tests name files of the source tree the build was made from (beside $PG_BUILD there).
src=$(dirname "$PG_BUILD")
for d in tests bench scripts integrations examples; do [ -e "$src/$d" ] || ln -s "$PWD/$d" "$src/$d"; done

step "collbench -g cuda"
for run in 1 2 3; do
  for z in 0 1; do
    timeout 40 "$B/collbench" allreduce -g cuda --direct -b 8 -e 256M -f 4 -n 100 -w 10 -z "$z" \
      > "$out/collbench_z${z}_r${run}.txt" 2>&1
  done
done
tail -14 "$out/collbench_z0_r1.txt"

# Only now the CPU work: on 2026-11-27 the extension's compile (16 jobs) ran beside
# collbench, and procgroup's in-place time per operation (host-bound) came out at 4.7-7.4 µs
# against 2.4-3.1 µs measured alone before.
(OUT=$out/torch timeout 380 bash tests/torch/device_run.sh cpu > "$out/torch_run.log" 2>&1) &
cpu_pid=$!
(timeout 240 bash tests/torch/device_exception_probe.sh > "$out/probe.log" 2>&1) &
probe_pid=$!

step "ctest -L gpu"
timeout 200 ctest --test-dir "$PG_BUILD" -L gpu -j4 --output-on-failure > "$out/ctest.log" 2>&1
echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$out/ctest.log" | head -20

step "c10d store client and torchrun against torch 2.x"
timeout 150 ctest --test-dir "$PG_BUILD" -R 'C10dTorch|TorchrunDefaultLaunch' -j4 --output-on-failure \
  > "$out/ctest_c10d.log" 2>&1
echo "ctest c10d rc=$?"
grep -E "tests passed|Failed|\*\*\*|Skipped|Timeout" "$out/ctest_c10d.log" | head -20

step "exception probe"
wait "$probe_pid"
grep -E "^== |torch |abi" "$out/probe.log" | head -20

step "torch 2.x tests on CPU tensors"
wait "$cpu_pid"
grep -E "^== " "$out/torch_run.log"

step "torch 2.x CUDA tests"
OUT=$out/torch timeout 100 bash tests/torch/device_run.sh cuda > "$out/torch_cuda_run.log" 2>&1
grep -E "^== " "$out/torch_cuda_run.log"

step "done"
