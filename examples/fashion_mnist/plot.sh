#!/usr/bin/env bash
# Plots the loss and accuracy curves of one or more fashion_mnist runs (their --csv files) on
# one chart, with gnuplot (Debian: gnuplot-nox): training loss solid and test loss dashed on
# the left, test accuracy solid and training accuracy dashed on the right, one colour per run.
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

loss="" acc=""
i=0
for arg in "$@"; do
  if [[ $arg == *=* ]]; then label=${arg%%=*} file=${arg#*=}; else label=$(basename "$arg" .csv) file=$arg; fi
  [[ -r $file ]] || { echo "$0: cannot read $file" >&2; exit 1; }
  i=$((i + 1))
  file=${file//\'/\'\'} label=${label//\'/\'\'}  # gnuplot single-quoted strings
  sep=$([[ -n $loss ]] && echo ", " || true)
  loss+="${sep}'$file' using 1:3 with linespoints lc $i lw 2 pt 7 ps 0.6 title '$label train', "
  loss+="'$file' using 1:5 with linespoints lc $i lw 2 dt 2 pt 6 ps 0.6 title '$label test'"
  acc+="${sep}'$file' using 1:(100*\$6) with linespoints lc $i lw 2 pt 7 ps 0.6 title '$label test', "
  acc+="'$file' using 1:(100*\$4) with linespoints lc $i lw 2 dt 2 pt 6 ps 0.6 title '$label train'"
done

gnuplot <<EOF
set terminal pngcairo size 1400,560 font 'DejaVu Sans,11'
set output '${out//\'/\'\'}'
set datafile separator ','
set key autotitle columnhead
set grid
set multiplot layout 1,2 title '${title//\'/\'\'}'
set xlabel 'epoch'
set ylabel 'cross-entropy loss'
set key top right
plot $loss
set ylabel 'accuracy (%)'
set key bottom right
plot $acc
unset multiplot
EOF
echo "wrote $out"
