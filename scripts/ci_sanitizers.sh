#!/usr/bin/env bash
# The sanitizer and fuzz part of CI; scripts/test.sh runs it after the default suite.
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (Debug, `asan` preset): the core,
#         loopback and gloo tests below
#   tsan  ThreadSanitizer (Debug, `tsan` preset): the same tests
#   fuzz  each libFuzzer target for PROCGROUP_FUZZ_SECONDS (default 20) from its committed
#         corpus (`fuzz` preset, clang-14); skipped with a message when clang is missing
# Usage: scripts/ci_sanitizers.sh [asan] [tsan] [fuzz]   (no argument: all three)
# Each part says how long it took. Exit status: non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# What the sanitizers build and run: core, store, loader, loopback and gloo, through unit
# tests and real processes. (The conformance and ddp suites are left to the default build:
# they take most of the build time and exercise the same code.)
TARGETS=(common_test pg_store_test pg_tcp_store_hardening_test pg_rendezvous_env_test
         collectives_reduce_test collectives_algorithms_test negotiate_check_test
         core_diagnostics_test core_handle_test core_work_on_complete_test
         core_work_test core_blocking_call_test
         backend_direct_test gloo_direct_test
         mp_launch_test fault_mismatch_test
         pgrun mp_worker allreduce_demo fault_worker
         procgroup_backend_loopback procgroup_backend_loopback_p2p procgroup_backend_gloo)
# Every unit and mp test of the binaries built above; tests of binaries not built here
# (the _NOT_BUILT placeholders, loader/abi/install checks, the soak run, the docs check,
# which reads the --help of programs not built here) are left out.
# The always-on mismatch cases assert what a timeout race decides (which rank's timer
# fires first); sanitizers slow ranks unevenly, so those run in the default suite only.
TEST_ARGS=(-L 'unit|mp' -E '_NOT_BUILT$|^loader_|^abi|^install|^soak_|^docs_|^AlwaysOn/CollectiveMismatch')

failed=()
part() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== ci_sanitizers: $name"
  if "$@"; then
    echo "== ci_sanitizers: $name passed in $((SECONDS - start)) s"
  else
    echo "== ci_sanitizers: $name FAILED after $((SECONDS - start)) s"
    failed+=("$name")
  fi
}

sanitized() {  # preset
  cmake --preset "$1" -DPROCGROUP_WITH_UCX=OFF >/dev/null &&
    cmake --build --preset "$1" -j 2 --target "${TARGETS[@]}" &&
    ctest --preset "$1" "${TEST_ARGS[@]}"
}

fuzz() {
  if ! command -v clang++-14 >/dev/null; then
    echo "clang++-14 not found: install clang-14 and libclang-rt-14-dev to fuzz"
    return 0
  fi
  cmake --preset fuzz -DPROCGROUP_FUZZ_SECONDS="${PROCGROUP_FUZZ_SECONDS:-20}" >/dev/null &&
    cmake --build --preset fuzz -j 2 &&
    ctest --preset fuzz
}

parts=("$@")
((${#parts[@]})) || parts=(asan tsan fuzz)
for p in "${parts[@]}"; do
  case $p in
    asan | tsan) part "$p" sanitized "$p" ;;
    fuzz) part fuzz fuzz ;;
    *) echo "ci_sanitizers: unknown part '$p' (asan, tsan, fuzz)"; exit 2 ;;
  esac
done
if ((${#failed[@]})); then
  echo "== ci_sanitizers: failed: ${failed[*]}"
  exit 1
fi
