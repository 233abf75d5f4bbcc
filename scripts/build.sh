#!/usr/bin/env bash
# Configures and builds tether in build/ (Release). The cuda backend is built
# when nvcc is found, for sm_90. Where no GPU is present its kernels are
# compiled to sm_90 PTX only: nvcc still checks every kernel, the driver would
# compile them on first use, and the build skips ptxas (docs/architecture.md).
# Arguments go to cmake's configure step and override these defaults
# (-DCMAKE_CUDA_ARCHITECTURES=90 for machine code without a GPU present;
# -DTETHER_CUDA_COMPILE_CHECK=ON, as scripts/test.sh passes without a GPU, to
# compile the kernels only to check them).
# The host code is compiled for this machine's instruction set
# (TETHER_CPU_ARCH=native: its vector units run the cpu backend's lanes, 2-3x
# the portable baseline, bench/README.md); -DTETHER_CPU_ARCH= builds a binary
# that runs on any x86-64, as scripts/gpu-bundle.sh does.
# Every method's pairs are compiled in (TETHER_METHOD_HEADERS empty), as the
# tests need; -DTETHER_METHOD_HEADERS=rattle, as command 1 passes, compiles
# RATTLE's alone and the others' when first used.
# TETHER_TARGET names one target to build (default: all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
arch=90
scripts/has-gpu.sh || arch=90-virtual
# Ninja compiles every object as soon as its sources are there, libraries' and
# tests' alike (make waits for a target's dependencies first), which keeps both
# cores busy to the end. A build/ made by another generator is started afresh.
if [ -f build/CMakeCache.txt ] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=Ninja$" build/CMakeCache.txt; then
  rm -rf build
fi
log=$(mktemp)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETHER_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DTETHER_CUDA_COMPILE_CHECK=OFF -DTETHER_CPU_ARCH=native -DTETHER_METHOD_HEADERS= "$@" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; exit 1; }
grep "^-- tether:" "$log" || true  # says whether the cuda backend is built
rm -f "$log"
cmake --build build -j"$(nproc)" ${TETHER_TARGET:+--target "$TETHER_TARGET"}
# Where the build made the Python package, say how to import it without installing it.
if [ -z "${TETHER_TARGET:-}" ] && ls build/python/tether/_tether*.so >/dev/null 2>&1; then
  py=python3
  [ -x build-venv/bin/python ] && py=$PWD/build-venv/bin/python
  echo "[tether] the Python package: PYTHONPATH=$PWD/build/python $py -c 'import tether'"
fi
