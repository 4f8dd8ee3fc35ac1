#!/usr/bin/env bash
# Reproduces the figures in docs/training.md: 10-epoch runs on every process backend built,
# the equivalence runs (1 rank x 128 against 2 ranks x 64, with and without --sync-bn), the
# communication-overhead table, and a rank killed mid-epoch then resumed. Each measurement
# waits (a while) for the machine to be quiet, and the timed runs go under `chrt -f 10`
# (SCHED_FIFO, as docs/benchmarks.md does on this shared machine; RT= to run normally).
#
#   examples/fashion_mnist/experiments.sh [BUILD_DIR (build)] [OUT_DIR (BUILD_DIR/fashion_mnist/experiments)]
#   STEPS=200 REPEATS=3 BATCHES="64 128 256" examples/fashion_mnist/experiments.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=${2:-$build/fashion_mnist/experiments}
steps=${STEPS:-200}
repeats=${REPEATS:-3}
batches=${BATCHES:-64 128 256}
read -r -a rt <<<"${RT-chrt -f 10}"
mkdir -p "$out"
pgrun=$build/bin/pgrun
train=$build/bin/fashion_mnist
export PROCGROUP_TIMEOUT=${PROCGROUP_TIMEOUT:-30} OPENBLAS_NUM_THREADS=1

backends=(gloo)
[[ -e $build/lib/procgroup/libprocgroup-ucx.so ]] && backends+=(ucx)

# Waits (up to QUIET_WAIT seconds, 120) until the CPUs are at least 85% idle over 3 seconds.
wait_quiet() {
  local deadline=$((SECONDS + ${QUIET_WAIT:-120})) idle
  while :; do
    idle=$(awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; sleep 3
           awk '/^cpu /{print $5+$6, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)
    idle=$(echo "$idle" | awk 'NR==1{i=$1;t=$2} NR==2{print int(100*($1-i)/($2-t))}')
    if ((idle >= 85)); then
      echo "   (machine ${idle}% idle)"
      return 0
    fi
    if ((SECONDS > deadline)); then
      echo "   (machine still busy: ${idle}% idle; measuring anyway)"
      return 0
    fi
    sleep 5
  done
}

run() {  # run BACKEND RANKS TAG ARGS...: a 10-epoch run, CSV and final state under $out
  local backend=$1 ranks=$2 tag=$3
  shift 3
  wait_quiet
  echo "== $tag: $ranks rank(s) on $backend $*"
  PROCGROUP_BACKEND=$backend "${rt[@]}" "$pgrun" --nproc-per-node "$ranks" "$train" --epochs 10 \
    --progress none --csv "$out/$tag.csv" --final-state "$out/$tag.final" "$@" |
    grep -E "epoch +[0-9]+/|done:"
}

for b in "${backends[@]}"; do run "$b" 2 "${b}_2x64" --batch-size 64; done
run gloo 1 "gloo_1x128_syncbn" --batch-size 128 --sync-bn
run gloo 2 "gloo_2x64_syncbn" --batch-size 64 --sync-bn

echo "== overhead: (DDP - no_sync) / no_sync, $steps steps each, $repeats repeats"
rm -f "$out/overhead.txt"
for b in "${backends[@]}"; do
  for batch in $batches; do
    for ((r = 1; r <= repeats; ++r)); do
      wait_quiet
      PROCGROUP_BACKEND=$b "${rt[@]}" "$pgrun" --nproc-per-node 2 "$train" --batch-size "$batch" \
        --measure-overhead "$steps" | grep "overhead:" | tee -a "$out/overhead.txt"
    done
  done
done

echo "== kill rank 1 in the middle of epoch 4, then --resume (gloo)"
wait_quiet
port=$((20000 + RANDOM % 20000))
rm -f "$out/killed.ckpt" "$out/killed.csv" "$out/killed.final" "$out/stalled"
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    PROCGROUP_BACKEND=gloo "$train" --epochs 10 --batch-size 64 --progress none \
    --checkpoint "$out/killed.ckpt" --csv "$out/killed.csv" --final-state "$out/killed.final" \
    --stall-at-step $((3 * 469 + 234)) --stall-rank 1 --stall-marker "$out/stalled" \
    >"$out/killed.rank$r.log" 2>&1 &
  pids+=($!)
done
while [[ ! -e $out/stalled ]]; do sleep 0.2; done
kill -9 "$(cat "$out/stalled")"
t0=$SECONDS
set +e
wait "${pids[0]}"
echo "   rank 0 exited with $? after $((SECONDS - t0)) s: $(grep "fashion_mnist: rank 0: error" "$out/killed.rank0.log")"
wait "${pids[1]}" 2>/dev/null
set -e
PROCGROUP_BACKEND=gloo "$pgrun" --nproc-per-node 2 "$train" --epochs 10 --batch-size 64 \
  --progress none --checkpoint "$out/killed.ckpt" --csv "$out/killed.csv" \
  --final-state "$out/killed.final" --resume | grep -E "resumed|done:"
if cmp -s "$out/killed.final" "$out/gloo_2x64.final"; then
  echo "   resumed run's final state is bit-identical to the uninterrupted run's"
else
  echo "   resumed run's final state DIFFERS from the uninterrupted run's"
fi

plots=("1 rank x 128, sync-bn=$out/gloo_1x128_syncbn.csv" "2 ranks x 64, sync-bn=$out/gloo_2x64_syncbn.csv")
for b in "${backends[@]}"; do plots+=("2 ranks x 64 ($b)=$out/${b}_2x64.csv"); done
examples/fashion_mnist/plot.sh "$out/curves.png" "${plots[@]}"
