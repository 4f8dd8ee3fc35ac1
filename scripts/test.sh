#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (what CI runs). Extra arguments go to
# ctest, e.g. scripts/test.sh -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --preset default "$@"
