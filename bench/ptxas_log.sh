#!/usr/bin/env bash
# Compiler launcher for bench/ptxas_report.sh: runs one compile and keeps its
# stderr (ptxas -v's report) in $TETHER_PTXAS_LOGS/<object>.log, one file per
# object, so that parallel compiles do not interleave their reports.
out=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out=$a
  prev=$a
done
log="$TETHER_PTXAS_LOGS/$(basename "${out:-unknown}").log"
"$@" 2>"$log"
rc=$?
[ $rc -eq 0 ] || cat "$log" >&2
exit $rc
