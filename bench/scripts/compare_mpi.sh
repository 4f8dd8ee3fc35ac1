#!/usr/bin/env bash
# procgroup against Open MPI on the same collective and sizes, back to back: collbench on a
# procgroup backend under pgrun, then mpi_collbench under mpirun; prints, per size, both
# bus bandwidths and their ratio.
#
#   bench/scripts/compare_mpi.sh BACKEND [OP] [-- ARGS...]      e.g.  compare_mpi.sh gloo
#
# ARGS replace the default options of both tools (-b 8 -e 256M -f 2 -n 20 -w 5 -z 1): -z 1
# waits for each procgroup operation before the next, as MPI's blocking calls do. RANKS
# (default 2), BUILD_DIR (the build tree or install prefix; default: the prefix this script
# is installed in, <prefix>/share/procgroup/bench, else build), MPI_ARGS (extra mpirun
# options, e.g. "--mca btl self,tcp" for MPI over TCP like gloo; default: Open MPI's choice,
# shared memory on one host) and OUT (directory for the CSV files; default: a new temporary one).
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }
[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage $(( $# >= 1 ? 0 : 2 ))
backend=$1; shift
op=allreduce
if [[ $# -gt 0 && $1 != -- ]]; then op=$1; shift; fi
args=(-b 8 -e 256M -f 2 -n 20 -w 5 -z 1)
if [[ $# -gt 0 ]]; then
  [[ $1 == -- ]] || usage 2
  shift
  args=("$@")
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z ${BUILD_DIR:-} ]]; then
  BUILD_DIR=build
  [[ -x $here/../../../bin/collbench ]] && BUILD_DIR=$(cd "$here/../../.." && pwd)  # installed
fi
RANKS=${RANKS:-2}
bin=$BUILD_DIR/bin
for tool in pgrun collbench mpi_collbench; do
  [[ -x $bin/$tool ]] || { echo "compare_mpi.sh: $bin/$tool not built" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "compare_mpi.sh: mpirun not found (openmpi-bin)" >&2; exit 1; }
# lib/procgroup in a build tree; <libdir>/procgroup in an install (lib, or lib/<multiarch>).
plugins=$(ls -d "$BUILD_DIR"/lib/procgroup "$BUILD_DIR"/lib/*/procgroup 2>/dev/null | head -n 1 || true)
[[ -n $plugins && -f $plugins/libprocgroup-$backend.so ]] ||
  { echo "compare_mpi.sh: no $backend plugin in $BUILD_DIR/lib/procgroup" >&2; exit 1; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"

echo "== procgroup $backend: $op, $RANKS ranks" >&2
PROCGROUP_BACKEND=$backend "$bin/pgrun" --no-prefix --nproc-per-node "$RANKS" "$bin/collbench" \
  "$op" "${args[@]}" --csv "$out/procgroup_$backend.csv" >"$out/procgroup_$backend.txt"
echo "== Open MPI: $op, $RANKS ranks ${MPI_ARGS:-}" >&2
# shellcheck disable=SC2086  # MPI_ARGS is a list of options
mpirun --allow-run-as-root --oversubscribe -np "$RANKS" ${MPI_ARGS:-} "$bin/mpi_collbench" \
  "$op" "${args[@]}" --csv "$out/mpi.csv" >"$out/mpi.txt"

# Join the two CSVs on (size, dtype, redop); columns: 5 size, 7 dtype, 8 redop, 10 time,
# 12 busbw out of place, 16 busbw in place.
awk -F, -v backend="$backend" -v op="$op" -v ranks="$RANKS" '
  FNR == 1 { next }
  NR == FNR { key = $5 FS $7 FS $8; pt[key] = $10; pb[key] = $12; pi[key] = $16; next }
  {
    key = $5 FS $7 FS $8
    if (!(key in pb)) next
    if (!printed++) {
      printf "# %s, %d ranks: procgroup (%s) against Open MPI; ratio = busbw procgroup / busbw MPI\n", op, ranks, backend
      printf "# %10s %5s %5s %11s %9s %11s %9s %8s %8s\n", "size (B)", "type", "redop", \
        "pg time us", "pg busbw", "mpi time us", "mpi busbw", "ratio", "ratio ip"
    }
    r = ($12 > 0) ? pb[key] / $12 : 0
    rip = ($16 > 0 && pi[key] != "") ? pi[key] / $16 : 0
    printf "%12d %5s %5s %11.2f %9.4f %11.2f %9.4f %8.3f %8.3f\n", $5, $7, $8, pt[key], pb[key], $10, $12, r, rip
  }' "$out/procgroup_$backend.csv" "$out/mpi.csv"
echo "# tables and CSV files: $out" >&2
