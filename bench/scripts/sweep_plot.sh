#!/usr/bin/env bash
# Allreduce bus bandwidth against message size for every procgroup backend that runs across
# processes (gloo; ucx when its plugin is built), raw Gloo (collbench --direct) and Open MPI
# (mpi_collbench), all in the same mode, as CSV/JSON files and one log-log PNG drawn with
# gnuplot (gnuplot-nox), with this machine's memcpy and f32 reduce-into bandwidth at each size
# (collbench --reference, in the first run) as the reference lines.
#
#   sweep_plot.sh [-o DIR] [-n RANKS] [--no-mpi] [--no-direct] [--memcpy GBPS] [-- ARGS...]
#
# ARGS replace the default options of every run (-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum
# -c 1 -z 1: blocking; -z 0 pipelines procgroup and MPI alike); the title says the mode.
# --memcpy draws a fixed memcpy line instead of measuring. BUILD_DIR is the build tree or
# install prefix (default: the prefix this script is installed in,
# <prefix>/share/procgroup/bench, else build); MPI_ARGS adds mpirun options (e.g. "--mca btl
# self,tcp" to make MPI use TCP, as gloo does); BIND (core, the default, or none) binds the
# ranks of every run alike (pgrun --bind-to, mpirun --bind-to). Writes DIR/allreduce_<name>.csv, .json, .txt
# (the table), DIR/memcpy.csv (and reduce.csv when measured) and DIR/allreduce_busbw.png;
# DIR defaults to BUILD_DIR/bench-results.
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
args=(-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1 -z 1)
bind=${BIND:-core}
[[ $bind == core || $bind == none ]] ||
  { echo "sweep_plot.sh: BIND is core or none, not '$bind'" >&2; exit 2; }

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
# The first run also measures the memory reference (--reference: columns 23 and 24).
lines=()
reference_csv=""
for backend in gloo ucx; do
  [[ -n $plugins && -f $plugins/libprocgroup-$backend.so ]] || continue
  extra=()
  [[ $backend == gloo && $with_direct == 1 ]] && extra=(--direct)
  [[ -z $memcpy_gbps && -z $reference_csv ]] && extra+=(--reference)
  base=$out_dir/allreduce_$backend
  echo "== procgroup $backend: $ranks ranks" >&2
  if ! PROCGROUP_BACKEND=$backend "$bin/pgrun" --no-prefix --bind-to "$bind" --nproc-per-node "$ranks" \
    "$bin/collbench" allreduce "${args[@]}" "${extra[@]}" --csv "$base.csv" --json "$base.json" \
    >"$base.txt"; then
    cat "$base.txt"
    echo "sweep_plot.sh: the $backend run failed; it gets no line" >&2
    continue
  fi
  cat "$base.txt"
  lines+=("$base.csv|12|procgroup $backend")
  [[ " ${extra[*]} " == *" --direct "* ]] && lines+=("$base.csv|19|raw Gloo (--direct)")
  [[ " ${extra[*]} " == *" --reference "* ]] && reference_csv=$base.csv
done
[[ ${#lines[@]} -gt 0 ]] || { echo "sweep_plot.sh: no multi-process backend in $plugins" >&2; exit 1; }

if [[ $with_mpi == 1 ]]; then
  if [[ -x $bin/mpi_collbench ]] && command -v mpirun >/dev/null; then
    base=$out_dir/allreduce_mpi
    echo "== Open MPI: $ranks ranks ${MPI_ARGS:-}" >&2
    # shellcheck disable=SC2086  # MPI_ARGS is a list of options
    if mpirun --allow-run-as-root --oversubscribe --bind-to "$bind" -np "$ranks" ${MPI_ARGS:-} \
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

# The reference: this machine's memcpy and f32 reduce-into (dst[i] += src[i]) at each size,
# every rank at once (collbench --reference), or a fixed --memcpy GBPS.
memcpy_csv=$out_dir/memcpy.csv
reduce_csv=$out_dir/reduce.csv
sizes=$(awk -F, 'FNR > 1 { print $5 }' "${lines[0]%%|*}" | sort -nu | tr '\n' ' ')
if [[ -n $memcpy_gbps ]]; then
  awk -v g="$memcpy_gbps" 'BEGIN { print "size,gbps" } { for (i = 1; i <= NF; ++i) print $i "," g }' \
    <<<"$sizes" >"$memcpy_csv"
  lines+=("$memcpy_csv|2|memcpy (given)")
elif [[ -n $reference_csv ]]; then
  awk -F, 'BEGIN { print "size,gbps" } FNR > 1 && $23 != "" { print $5 "," $23 }' \
    "$reference_csv" >"$memcpy_csv"
  awk -F, 'BEGIN { print "size,gbps" } FNR > 1 && $24 != "" { print $5 "," $24 }' \
    "$reference_csv" >"$reduce_csv"
  lines+=("$memcpy_csv|2|memcpy, every rank at once" "$reduce_csv|2|f32 reduce-into, every rank at once")
fi
first=${lines[0]%%|*}
mode=$(grep -q '"blocking": true' "${first%.csv}.json" && echo "blocking (-z 1)" ||
  echo "pipelined (-z 0)")

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
  if [[ $file == "$memcpy_csv" || $file == "$reduce_csv" ]]; then
    style="with lines lw 2 dt $([[ $file == "$memcpy_csv" ]] && echo 2 || echo 3) lc 'black'"
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
set title 'allreduce, $ranks ranks, out of place, $mode on every side: busbw = size / time x 2(n-1)/n'
set key top left
set grid
plot $plot
GNUPLOT
echo "wrote $png and the CSV/JSON/TXT files in $out_dir" >&2
