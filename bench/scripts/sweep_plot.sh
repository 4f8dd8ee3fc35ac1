#!/usr/bin/env bash
# Allreduce bus bandwidth against message size for every procgroup backend that runs across
# processes (gloo; ucx when its plugin is built), raw Gloo (collbench --direct) and Open MPI
# (mpi_collbench), as CSV/JSON files and one log-log PNG drawn with gnuplot (gnuplot-nox),
# with one thread's memcpy bandwidth at each size as the reference line.
#
#   sweep_plot.sh [-o DIR] [-n RANKS] [--no-mpi] [--no-direct] [--memcpy GBPS] [-- ARGS...]
#
# ARGS replace the default collbench options (-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1)
# for every run. --memcpy draws a fixed reference line instead of measuring memcpy (python3).
# BUILD_DIR is the build tree or install prefix (default: the prefix this script is installed
# in, <prefix>/share/procgroup/bench, else build); MPI_ARGS adds mpirun options (e.g. "--mca
# btl self,tcp" to make MPI use TCP, as gloo does). Writes DIR/allreduce_<name>.csv, .json,
# .txt (the table), DIR/memcpy.csv and DIR/allreduce_busbw.png; DIR defaults to
# BUILD_DIR/bench-results.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z ${BUILD_DIR:-} ]]; then
  BUILD_DIR=build
  [[ -x $here/../../../bin/collbench ]] && BUILD_DIR=$(cd "$here/../../.." && pwd)  # installed
fi
out_dir=""
memcpy_gbps=""
ranks=2
with_mpi=1
with_direct=1
args=(-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1)

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out_dir=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    --no-mpi) with_mpi=0; shift ;;
    --no-direct) with_direct=0; shift ;;
    --memcpy) memcpy_gbps=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; args=("$@"); break ;;
    *) echo "sweep_plot.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
out_dir=${out_dir:-$BUILD_DIR/bench-results}
mkdir -p "$out_dir"

bin=$BUILD_DIR/bin
# lib/procgroup in a build tree; <libdir>/procgroup in an install (lib, or lib/<multiarch>).
plugins=$(ls -d "$BUILD_DIR"/lib/procgroup "$BUILD_DIR"/lib/*/procgroup 2>/dev/null | head -n 1 || true)
for tool in pgrun collbench; do
  [[ -x $bin/$tool ]] || { echo "sweep_plot.sh: $bin/$tool not built" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "sweep_plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

# Plot lines: "file|column|title", busbw out of place (column 12) or raw Gloo's (column 19).
lines=()
for backend in gloo ucx; do
  [[ -n $plugins && -f $plugins/libprocgroup-$backend.so ]] || continue
  extra=()
  [[ $backend == gloo && $with_direct == 1 ]] && extra=(--direct)
  base=$out_dir/allreduce_$backend
  echo "== procgroup $backend: $ranks ranks" >&2
  if ! PROCGROUP_BACKEND=$backend "$bin/pgrun" --no-prefix --nproc-per-node "$ranks" \
    "$bin/collbench" allreduce "${args[@]}" "${extra[@]}" --csv "$base.csv" --json "$base.json" \
    >"$base.txt"; then
    cat "$base.txt"
    echo "sweep_plot.sh: the $backend run failed; it gets no line" >&2
    continue
  fi
  cat "$base.txt"
  lines+=("$base.csv|12|procgroup $backend")
  [[ ${#extra[@]} -gt 0 ]] && lines+=("$base.csv|19|raw Gloo (--direct)")
done
[[ ${#lines[@]} -gt 0 ]] || { echo "sweep_plot.sh: no multi-process backend in $plugins" >&2; exit 1; }

if [[ $with_mpi == 1 ]]; then
  if [[ -x $bin/mpi_collbench ]] && command -v mpirun >/dev/null; then
    base=$out_dir/allreduce_mpi
    echo "== Open MPI: $ranks ranks ${MPI_ARGS:-}" >&2
    # shellcheck disable=SC2086  # MPI_ARGS is a list of options
    if mpirun --allow-run-as-root --oversubscribe -np "$ranks" ${MPI_ARGS:-} \
      "$bin/mpi_collbench" allreduce "${args[@]}" --csv "$base.csv" --json "$base.json" \
      >"$base.txt"; then
      lines+=("$base.csv|12|Open MPI${MPI_ARGS:+ ($MPI_ARGS)}")
    else
      echo "sweep_plot.sh: the MPI run failed; it gets no line" >&2
    fi
    cat "$base.txt"
  else
    echo "sweep_plot.sh: no MPI line (mpi_collbench not built or mpirun missing)" >&2
  fi
fi

# The reference: one thread copying a buffer of each size >= 4 KiB (best of 5), the most a
# transport that moves every byte through memory once could give on one host.
memcpy_csv=$out_dir/memcpy.csv
sizes=$(awk -F, 'FNR > 1 { print $5 }' "${lines[0]%%|*}" | sort -nu | tr '\n' ' ')
if [[ -n $memcpy_gbps ]]; then
  awk -v g="$memcpy_gbps" 'BEGIN { print "size,gbps" } { for (i = 1; i <= NF; ++i) print $i "," g }' \
    <<<"$sizes" >"$memcpy_csv"
elif command -v python3 >/dev/null; then
  python3 - "$sizes" >"$memcpy_csv" <<'PY'
import sys, time
print("size,gbps")
for size in (int(s) for s in sys.argv[1].split() if int(s) >= 4096):
    src, dst = bytearray(size), bytearray(size)
    view, reps, best = memoryview(dst), max(1, (64 << 20) // size), 0.0
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            view[:] = src
        best = max(best, size * reps / (time.perf_counter() - t) / 1e9)
    print(f"{size},{best:.3f}")
PY
else
  echo "sweep_plot.sh: no memcpy line (python3 missing; give --memcpy GBPS)" >&2
  : >"$memcpy_csv"
fi
[[ -s $memcpy_csv ]] && lines+=("$memcpy_csv|2|memcpy, one thread${memcpy_gbps:+ (given)}")

# Size ticks every factor of 8 (or more), labelled 8 B, 64 B, 512 B, 4 KiB, ...
xtics=$(awk -v sizes="$sizes" 'BEGIN {
  n = split(sizes, s, " "); step = 1; while (n / step > 12) step *= 2
  split("B KiB MiB GiB TiB", unit, " ")
  for (i = 1; i <= n; i += step) {
    v = s[i]; u = 1; while (v >= 1024 && v % 1024 == 0) { v /= 1024; ++u }
    printf "%s\"%d %s\" %d", (i > 1 ? ", " : ""), v, unit[u], s[i]
  } }')

png=$out_dir/allreduce_busbw.png
plot=""
for line in "${lines[@]}"; do
  IFS='|' read -r file column title <<<"$line"
  if [[ $file == "$memcpy_csv" ]]; then
    style="with lines lw 2 dt 2 lc 'black'"
    using=1
  else
    style="with linespoints lw 2"
    using=5
  fi
  plot+="${plot:+, }'$file' skip 1 using $using:(\$$column > 0 ? \$$column : NaN) $style title '$title'"
done
gnuplot <<GNUPLOT
set terminal pngcairo size 1000,600 noenhanced font 'DejaVu Sans,11'
set output '$png'
set datafile separator ','
set logscale xy 2
set logscale y 10
set xtics ($xtics)
set format y '%g'
set xlabel 'message size per rank'
set ylabel 'bus bandwidth (GB/s, 10^9 bytes/s, log scale)'
set title 'allreduce, $ranks ranks, out of place: busbw = size / time x 2(n-1)/n'
set key top left
set grid
plot $plot
GNUPLOT
echo "wrote $png and the CSV/JSON/TXT files in $out_dir" >&2
