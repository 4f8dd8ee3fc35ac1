#!/usr/bin/env bash
# Prints, for a build directory whose last ctest run had failures, each failed test's
# name and the end of its output (from ctest's own log). CI shows only the end of what a
# run prints, so test.sh calls this last: the failure is then what a reader sees first.
# Usage: scripts/report_failures.sh BUILD_DIR [LINES]
set -uo pipefail
dir=$1
[[ -d $dir ]] || exit 0
lines=${2:-40}
failed_log=$dir/Testing/Temporary/LastTestsFailed.log
full_log=$dir/Testing/Temporary/LastTest.log
[[ -s $failed_log ]] || exit 0
echo "== failed tests in $dir:"
sed 's/^[0-9]*:/  /' "$failed_log"
while IFS=: read -r _ name; do
  echo "== output of $name (last $lines lines):"
  # A test's block runs from "N/M Testing: name" to its "<end of output>" marker.
  awk -v t="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); inside = ($0 == t); next }
    inside && /^<end of output>/ { inside = 0 }
    inside { print }' "$full_log" | tail -n "$lines"
done <"$failed_log"
