#!/usr/bin/env bash
# Command 2: install, build, and run the whole test suite (gpu-labelled tests
# skip themselves where no device is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# Tests share two cores: idle OpenMP threads must sleep, not spin.
export OMP_WAIT_POLICY=passive
ctest --test-dir build --output-on-failure -j"$(nproc)"
