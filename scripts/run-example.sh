#!/usr/bin/env bash
# Command 1: install, build what the run needs (the tether command with its
# example's method, RATTLE, compiled in: another method's pairs compile when
# first used; the cuda kernels only when a GPU is present), and run the
# bundled example (backend auto: cuda when a GPU is present, else cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cuda=OFF
if scripts/has-gpu.sh; then cuda=ON; fi
# The build's own lines go to a log, shown only if it fails.
log=$(mktemp)
echo "[tether] building the tether command (about 2.5 minutes on 2 cores)"
TETHER_TARGET=tether scripts/build.sh -DTETHER_ENABLE_CUDA="$cuda" -DTETHER_METHOD_HEADERS=rattle >"$log" 2>&1 ||
  { cat "$log"; rm -f "$log"; exit 1; }
rm -f "$log"
./build/tether run configs/spherical_pendulum.json --out runs/spherical_pendulum
