#!/usr/bin/env bash
# Allreduce bus bandwidth against message size for every procgroup backend that runs across
# processes (gloo; ucx when its plugin is built), raw Gloo (collbench --direct) and Open MPI
# (mpi_collbench), as CSV/JSON files and one PNG drawn with gnuplot (Debian: gnuplot-nox).
#
#   bench/scripts/sweep_plot.sh [-o DIR] [-n RANKS] [--no-mpi] [--no-direct] [-- ARGS...]
#
# ARGS replace the default collbench options (-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1)
# for every run. BUILD_DIR (default: build) is the build tree; MPI_ARGS adds mpirun options
# (e.g. "--mca btl self,tcp" to make MPI use TCP, as gloo does). Writes DIR/allreduce_<name>.csv,
# .json, .txt (the table) and DIR/allreduce_busbw.png; DIR defaults to BUILD_DIR/bench-results.
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
out_dir=""
ranks=2
with_mpi=1
with_direct=1
args=(-b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1)

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -o) out_dir=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    --no-mpi) with_mpi=0; shift ;;
    --no-direct) with_direct=0; shift ;;
    -h|--help) usage 0 ;;
    --) shift; args=("$@"); break ;;
    *) echo "sweep_plot.sh: unknown argument '$1'" >&2; usage 2 ;;
  esac
done
out_dir=${out_dir:-$BUILD_DIR/bench-results}
mkdir -p "$out_dir"

bin=$BUILD_DIR/bin
plugins=$BUILD_DIR/lib/procgroup
for tool in pgrun collbench; do
  [[ -x $bin/$tool ]] || { echo "sweep_plot.sh: $bin/$tool not built" >&2; exit 1; }
done
command -v gnuplot >/dev/null || { echo "sweep_plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

# Plot lines: "file|column|title", busbw out of place (column 12) or raw Gloo's (column 19).
lines=()
for backend in gloo ucx; do
  [[ -f $plugins/libprocgroup-$backend.so ]] || continue
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

png=$out_dir/allreduce_busbw.png
plot=""
for line in "${lines[@]}"; do
  IFS='|' read -r file column title <<<"$line"
  plot+="${plot:+, }'$file' skip 1 using 5:$column with linespoints title '$title'"
done
gnuplot <<GNUPLOT
set terminal pngcairo size 1000,600 noenhanced
set output '$png'
set datafile separator ','
set logscale x 2
set format x '%.0b%B'
set xlabel 'message size per rank (bytes; ki = 1024, Mi = 1024^2)'
set ylabel 'bus bandwidth (GB/s)'
set title 'allreduce, $ranks ranks, out of place: busbw = size/time * 2(n-1)/n'
set key top left
set grid
plot $plot
GNUPLOT
echo "wrote $png and the CSV/JSON/TXT files in $out_dir" >&2
