#!/usr/bin/env bash
# procgroup against Open MPI on the same collective, sizes and mode: collbench on a procgroup
# backend under pgrun and mpi_collbench under mpirun, alternating, RUNS times each; prints,
# per size, the medians of both times and bus bandwidths, their ratio, and this machine's
# memcpy and f32 reduce-into bandwidth at that size, measured in the same runs.
#
#   bench/scripts/compare_mpi.sh BACKEND [OP] [--mode MODE] [--bind B] [--runs N] [--busy K]
#                                [-- ARGS...]
#
# --mode is the same on both sides: blocking (the default; -z 1: each operation waited for
# before the next is issued, MPI's blocking calls) or pipelined (-z 0: all -n operations
# issued, then waited for; MPI's nonblocking calls, then MPI_Waitall). --bind is the same on
# both sides too: core (the default, as mpirun binds 2 ranks; pgrun --bind-to core) or none
# (mpirun --bind-to none, pgrun's default). --busy K (default 0) keeps K busy processes
# (`while :; do :; done`, unbound) running beside both sides for the whole comparison: a
# machine shared with other work. --runs N (default 3):
# runs per side; the table gives medians, ratio = median busbw procgroup / median busbw MPI,
# and the range of the per-run ratios. ARGS replace the other default options of both tools
# (-b 8 -e 256M -f 2 -n 20 -w 5); a -z or --blocking in them is refused, since the mode is
# --mode's. The memcpy and reduce columns are mpi_collbench --reference (both ranks at once,
# medians over the MPI runs): the physical limit beside the table. The 1-minute load average
# before and after is printed with it. RANKS (default 2), BUILD_DIR (the build tree or install
# prefix; default: the prefix this script is installed in, <prefix>/share/procgroup/bench,
# else build), MPI_ARGS (extra mpirun options, e.g. "--mca btl self,tcp" for MPI over TCP like
# gloo; default: Open MPI's choice, shared memory on one host) and OUT (directory for the CSV,
# JSON and table files; default: a new temporary one).
set -euo pipefail

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }
[[ $# -ge 1 && $1 != -h && $1 != --help ]] || usage $(( $# >= 1 ? 0 : 2 ))
backend=$1; shift
op=allreduce
if [[ $# -gt 0 && $1 != -* ]]; then op=$1; shift; fi
mode=blocking
bind=core
runs=3
busy=0
args=(-b 8 -e 256M -f 2 -n 20 -w 5)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mode) [[ $# -ge 2 ]] || usage 2; mode=$2; shift 2 ;;
    --bind) [[ $# -ge 2 ]] || usage 2; bind=$2; shift 2 ;;
    --runs) [[ $# -ge 2 ]] || usage 2; runs=$2; shift 2 ;;
    --busy) [[ $# -ge 2 ]] || usage 2; busy=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; args=("$@"); break ;;
    *) echo "compare_mpi.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
case "$mode" in
  blocking) z=1 ;;
  pipelined) z=0 ;;
  *) echo "compare_mpi.sh: --mode is blocking or pipelined, not '$mode'" >&2; exit 2 ;;
esac
[[ $bind == core || $bind == none ]] ||
  { echo "compare_mpi.sh: --bind is core or none, not '$bind'" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "compare_mpi.sh: --runs takes a positive count" >&2; exit 2; }
[[ $busy =~ ^[0-9]+$ ]] || { echo "compare_mpi.sh: --busy takes a count (0: none)" >&2; exit 2; }
for a in "${args[@]}"; do
  if [[ $a == -z* || $a == --blocking* ]]; then
    echo "compare_mpi.sh: '$a' in ARGS: the mode is --mode's (blocking or pipelined), the same" \
      "on both sides" >&2
    exit 2
  fi
done

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

# Each run's JSON must say the mode asked for: an mpi_collbench from before -z 0 existed
# always ran blocking, whatever it was told.
want_blocking=$([[ $z == 1 ]] && echo true || echo false)
same_mode() {
  grep -q "\"blocking\": $want_blocking" "$1" ||
    { echo "compare_mpi.sh: $1 was not run $mode (-z $z): mixed modes, no table" >&2; exit 1; }
}

busy_pids=()
stop_busy() {
  ((${#busy_pids[@]} == 0)) || kill "${busy_pids[@]}" 2>/dev/null || true
  busy_pids=()
}
trap stop_busy EXIT
trap 'stop_busy; exit 130' INT TERM
for ((i = 0; i < busy; ++i)); do
  bash -c 'while :; do :; done' &
  busy_pids+=($!)
done
load_before=$(cut -d' ' -f1 /proc/loadavg)
files=()
for ((run = 1; run <= runs; ++run)); do
  base=$out/procgroup_$backend.$run
  echo "== $run/$runs procgroup $backend: $op, $RANKS ranks, $mode (-z $z)" >&2
  PROCGROUP_BACKEND=$backend "$bin/pgrun" --no-prefix --bind-to "$bind" --nproc-per-node "$RANKS" "$bin/collbench" \
    "$op" "${args[@]}" -z "$z" --csv "$base.csv" --json "$base.json" >"$base.txt"
  same_mode "$base.json"
  files+=(side=pg "run=$run" "$base.csv")
  base=$out/mpi.$run
  echo "== $run/$runs Open MPI: $op, $RANKS ranks, $mode (-z $z) ${MPI_ARGS:-}" >&2
  # shellcheck disable=SC2086  # MPI_ARGS is a list of options
  mpirun --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$RANKS" ${MPI_ARGS:-} "$bin/mpi_collbench" \
    "$op" "${args[@]}" -z "$z" --reference --csv "$base.csv" --json "$base.json" >"$base.txt"
  same_mode "$base.json"
  files+=(side=mpi "run=$run" "$base.csv")
done
load_after=$(cut -d' ' -f1 /proc/loadavg)
stop_busy

# Rows keyed by (size, dtype, redop); CSV columns: 5 size, 7 dtype, 8 redop, 10 time,
# 12 busbw out of place, 16 busbw in place, 23 memcpy, 24 reduce_f32.
awk -F, -v backend="$backend" -v op="$op" -v ranks="$RANKS" -v runs="$runs" -v mode="$mode" -v bind="$bind" -v busy="$busy" \
  -v z="$z" -v before="$load_before" -v after="$load_after" -v mpi_args="${MPI_ARGS:-}" '
  function median(prefix, k,    n, i, j, v, x) {
    n = 0
    for (i = 1; i <= runs; ++i) if ((prefix SUBSEP k SUBSEP i) in val) v[++n] = val[prefix, k, i]
    if (n == 0) return 0
    for (i = 2; i <= n; ++i) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; --j) v[j + 1] = v[j]; v[j + 1] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  FNR == 1 { next }
  {
    k = $5 FS $7 FS $8
    if (!(k in seen)) { seen[k] = 1; order[++nkeys] = k }
    val[side "t", k, run] = $10; val[side "b", k, run] = $12
    if ($16 != "") val[side "i", k, run] = $16
    if (side == "mpi" && $23 != "") { val["mc", k, run] = $23; val["rd", k, run] = $24 }
  }
  END {
    printf "# %s, %d ranks, %s (-z %s), bound to %s, on both sides: procgroup (%s) against Open MPI%s\n", op, ranks, mode, z, bind, backend, (mpi_args != "" ? " (" mpi_args ")" : "")
    printf "# medians of %d runs per side, alternating; ratio = median busbw procgroup / median busbw MPI (runs: min..max of the per-run ratios; ip: in place)\n", runs
    printf "# memcpy, reduce: this machine, f32 dst[i] += src[i] for reduce, size bytes, both ranks at once (mpi_collbench --reference, medians)\n"
    printf "# load average (1 min): %s before, %s after%s\n", before, after, (busy > 0 ? sprintf("; %d busy process(es) beside the ranks", busy) : "")
    printf "# %10s %5s %5s %11s %9s %11s %9s %7s %13s %7s %8s %8s\n", "size (B)", "type", "redop", \
      "pg time us", "pg busbw", "mpi time us", "mpi busbw", "ratio", "runs", "ip", "memcpy", "reduce"
    for (n = 1; n <= nkeys; ++n) {
      k = order[n]; split(k, f, FS)
      pb = median("pgb", k); mb = median("mpib", k); pi = median("pgi", k); mi = median("mpii", k)
      lo = ""; hi = ""
      for (i = 1; i <= runs; ++i) {
        if (!((("pgb") SUBSEP k SUBSEP i) in val) || !((("mpib") SUBSEP k SUBSEP i) in val)) continue
        if (val["mpib", k, i] <= 0) continue
        r = val["pgb", k, i] / val["mpib", k, i]
        if (lo == "" || r < lo) lo = r
        if (hi == "" || r > hi) hi = r
      }
      printf "%12d %5s %5s %11.2f %9.4f %11.2f %9.4f %7.3f %13s %7.3f %8.2f %8.2f\n", f[1], f[2], f[3], \
        median("pgt", k), pb, median("mpit", k), mb, (mb > 0 ? pb / mb : 0), \
        (lo == "" ? "n/a" : sprintf("%.3g..%.3g", lo, hi)), (mi > 0 ? pi / mi : 0), \
        median("mc", k), median("rd", k)
    }
  }' "${files[@]}"
echo "# tables, CSV and JSON files: $out" >&2
