#!/usr/bin/env bash
# Sets up, builds and runs the main job: a 2-rank allreduce through pgrun on the default
# backend, then the core's per-call overhead benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== pgrun --nproc-per-node 2 allreduce_demo (backend: ${PROCGROUP_BACKEND:-default})"
build/bin/pgrun --nproc-per-node 2 build/bin/allreduce_demo 1048576
echo "== core overhead against the plugin table"
build/bin/core_overhead
