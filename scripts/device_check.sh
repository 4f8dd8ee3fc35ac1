#!/usr/bin/env bash
# Everything still to verify on a GPU machine of the `device` tool (issues 13 and 15), as one
# call of at most about 9 minutes, each step bounded, logs written to $OUT/device_check as
# they come (so a run cut short still returns what it did):
#   1. ctest -L gpu on the packed build (the nccl plugin on the backend kit has not run on
#      a GPU since it moved there), beside the torch extension's build (CPU only);
#   2. the torch 2.x tests (tests/torch/device_run.sh: collectives incl. _coalescing_manager,
#      CUDA, DDP, failures, benchmark);
#   3. why exceptions thrown by procgroup_torch crash torch 2.11 (device_exception_probe.sh);
#   4. collbench -g cuda --direct, pipelined and blocking, 3 runs each (overhead vs raw NCCL).
# Here, first (about 5 minutes):
#   git worktree add /tmp/wt-gpu HEAD && cmake -S /tmp/wt-gpu -B /tmp/wt-gpu/build \
#     -DPROCGROUP_WITH_TORCH=OFF -G Ninja && cmake --build /tmp/wt-gpu/build -j2
#   bash ../shared/tools/device_pack.sh /tmp/wt-gpu/build
# then run `bash scripts/device_check.sh` on the device with carry [".device"].
set -u
source .device/env.sh || exit 1
out=${OUT:-/tmp}/device_check
mkdir -p "$out"
B=$PG_BUILD/bin
step() { echo "== $1 at $SECONDS s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"

step "ctest -L gpu (torch extension builds beside it)"
(OUT=$out/torch bash tests/torch/device_run.sh > "$out/torch_run.log" 2>&1) &
torch_pid=$!
timeout 200 ctest --test-dir "$PG_BUILD" -L gpu -j4 --output-on-failure > "$out/ctest.log" 2>&1
echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*|Not Run|Timeout" "$out/ctest.log" | head -20

step "torch 2.x tests"
wait "$torch_pid"
grep -E "^== " "$out/torch_run.log"

step "exception probe"
timeout 150 bash tests/torch/device_exception_probe.sh > "$out/probe.log" 2>&1
grep -E "^== |torch |abi" "$out/probe.log" | head -20

step "collbench -g cuda"
for run in 1 2 3; do
  for z in 0 1; do
    timeout 40 "$B/collbench" allreduce -g cuda --direct -b 8 -e 256M -f 4 -n 100 -w 10 -z "$z" \
      > "$out/collbench_z${z}_r${run}.txt" 2>&1
  done
done
tail -14 "$out/collbench_z0_r1.txt"

step "done"
