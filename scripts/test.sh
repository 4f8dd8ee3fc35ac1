#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (what CI runs): the default build's tests,
# clang-tidy of the sources the commit changed (scripts/clang_tidy.sh), then the sanitizer
# and fuzz runs (scripts/ci_sanitizers.sh: ASan+UBSan, TSan, libFuzzer).
# Extra arguments go to ctest and skip the sanitizer runs, e.g. scripts/test.sh -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if (($#)); then
  exec ctest --preset default "$@"
fi
status=0
start=$SECONDS
rm -f build*/Testing/Temporary/LastTestsFailed.log  # so only this run's failures are reported
ctest --preset default || status=$?
echo "== test.sh: default suite took $((SECONDS - start)) s"
# clang-tidy on the sources the tested commit changed (a few, about 15 s of CPU each).
if git rev-parse -q --verify HEAD~1 >/dev/null; then
  bash scripts/clang_tidy.sh --changed HEAD~1 --max-files 8 || status=1
fi
bash scripts/ci_sanitizers.sh || status=1
# Said again at the very end, where a reader of CI's last lines finds it.
for dir in build build-asan build-tsan build-fuzz; do
  bash scripts/report_failures.sh "$dir"
done
exit $status
