#!/usr/bin/env bash
# Sets up, builds and runs the main job: Fashion-MNIST trained with data-parallel SGD on 2
# ranks through pgrun on the default backend (10 epochs, a few minutes on 2 cores; results in
# build/fashion_mnist/), then the allreduce benchmark on the same backend.
# Extra arguments go to fashion_mnist (e.g. --resume, --epochs 3, --sync-bn); see
# docs/training.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the job runs (about a third of the build; scripts/test.sh builds the rest). The
# backend plugins are dlopen'ed, not linked: fashion_mnist and collbench depend on the ones
# they load by default (ucx where built, else gloo; nccl for --device cuda), and
# PROCGROUP_BACKEND=NAME adds NAME's (PROCGROUP_BACKEND=gloo runs the job on gloo).
targets=(pgrun fashion_mnist collbench)
if [[ -n ${PROCGROUP_BACKEND:-} && $PROCGROUP_BACKEND != */* && $PROCGROUP_BACKEND != *.so ]]; then
  targets+=("procgroup_backend_$PROCGROUP_BACKEND")
fi
bash scripts/setup.sh "${targets[@]}"

out=build/fashion_mnist
mkdir -p "$out"
echo "== pgrun --nproc-per-node 2 fashion_mnist (backend: ${PROCGROUP_BACKEND:-default})"
build/bin/pgrun --nproc-per-node 2 build/bin/fashion_mnist --epochs 10 \
  --csv "$out/main.csv" --checkpoint "$out/main.ckpt" "$@"
if command -v gnuplot >/dev/null; then
  examples/fashion_mnist/plot.sh "$out/main.png" "2 ranks=$out/main.csv"
fi

# ucx ranks bound like mpirun's, so a busy machine's other processes do not migrate onto
# them; gloo ranks unbound (Gloo's busy TCP loop thread would take the rank's own core).
bind=none
[[ ${PROCGROUP_BACKEND:-ucx} == ucx && -f build/lib/procgroup/libprocgroup-ucx.so ]] && bind=core
echo "== pgrun --bind-to $bind --nproc-per-node 2 collbench allreduce (backend: ${PROCGROUP_BACKEND:-default})"
build/bin/pgrun --bind-to "$bind" --nproc-per-node 2 build/bin/collbench allreduce -b 8 -e 16M
