#!/usr/bin/env bash
# Plots the loss and accuracy curves of one or more fashion_mnist runs (their --csv files) on
# one chart, with gnuplot (Debian: gnuplot-nox): loss on the left, accuracy on the right; in
# both, test is solid and train dashed, one colour and point shape per run. Runs that
# coincide stay visible: each later run is drawn thinner, on top of the earlier ones.
#
#   examples/fashion_mnist/plot.sh curves.png run1.csv "2 ranks x 64=run2.csv" ...
#
# An argument LABEL=FILE names the run LABEL; a bare FILE is labelled with its name.
# PLOT_TITLE overrides the chart's title.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 OUT.png [LABEL=]RUN.csv [[LABEL=]RUN.csv ...]" >&2
  exit 2
fi
command -v gnuplot >/dev/null || {
  echo "$0: gnuplot not found: apt-get install gnuplot-nox" >&2
  exit 1
}
out=$1
shift
title=${PLOT_TITLE:-Fashion-MNIST: MLP with batch norm, data-parallel SGD over procgroup}

loss="" acc="" epochs=1
n=$#
i=0
for arg in "$@"; do
  if [[ $arg == *=* ]]; then label=${arg%%=*} file=${arg#*=}; else label=$(basename "$arg" .csv) file=$arg; fi
  [[ -r $file ]] || { echo "$0: cannot read $file" >&2; exit 1; }
  last=$(awk -F, 'NR > 1 && $1 + 0 > m { m = $1 + 0 } END { print m + 0 }' "$file")
  if ((last > epochs)); then epochs=$last; fi
  i=$((i + 1))
  file=${file//\'/\'\'} label=${label//\'/\'\'}  # gnuplot single-quoted strings
  # The first run widest, so a later run lying exactly on it shows as a line inside a line.
  style="lc $i lw $((2 * (n - i) + 2)) pt $((2 * i + 4)) ps 0.9"
  loss+="'$file' using 1:5 with linespoints $style dt 1 title '$label', "
  loss+="'$file' using 1:3 with linespoints $style dt 2 notitle, "
  acc+="'$file' using 1:(100*\$6) with linespoints $style dt 1 title '$label', "
  acc+="'$file' using 1:(100*\$4) with linespoints $style dt 2 notitle, "
done
# The legend's line styles, in black: what solid and dashed mean in both panels.
styles="NaN with lines lc 'black' lw 2 dt 1 title 'test (solid)', NaN with lines lc 'black' lw 2 dt 2 title 'train (dashed)'"
xstep=$(((epochs + 9) / 10))  # whole epochs, at most about 10 ticks

gnuplot <<EOF
set terminal pngcairo size 1400,560 font 'DejaVu Sans,11'
set output '${out//\'/\'\'}'
set datafile separator ','
set datafile missing NaN
set key autotitle columnhead
set grid
set xrange [0.75:$epochs.25]
set xtics 1, $xstep format '%.0f'
set mxtics 1
set multiplot layout 1,2 title '${title//\'/\'\'}'
set xlabel 'epoch'
set ylabel 'cross-entropy loss'
set key top right
plot $loss $styles
set ylabel 'accuracy (%)'
set key bottom right
plot $acc $styles
unset multiplot
EOF
echo "wrote $out"
