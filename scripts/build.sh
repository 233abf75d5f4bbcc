#!/usr/bin/env bash
# Configures and builds tether in build/ (Release). The cuda backend is built
# when nvcc is found (for sm_90 unless CMAKE_CUDA_ARCHITECTURES says otherwise);
# arguments go to cmake's configure step and override these defaults.
# TETHER_TARGET names one target to build (default: all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
log=$(mktemp)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTETHER_ENABLE_CUDA=ON "$@" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
grep "^-- tether:" "$log" || true  # says whether the cuda backend is built
rm -f "$log"
cmake --build build -j"$(nproc)" ${TETHER_TARGET:+--target "$TETHER_TARGET"}
