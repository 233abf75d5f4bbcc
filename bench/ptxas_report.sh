#!/usr/bin/env bash
# Registers, stack frame and spill bytes of every cuda kernel as ptxas reports
# them for sm_90 (-Xptxas -v), tabulated into bench/results/ptxas-<date>-<commit>.{json,md}.
# Needs nvcc, not a GPU. Builds the cuda library alone in build-ptxas/, with
# machine code (the main build compiles PTX only where no GPU is present).
#   bench/ptxas_report.sh [extra cmake configure arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-ptxas
logs=$PWD/$dir/ptxas-logs
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
configured=$(cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DTETHER_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DTETHER_BUILD_TESTS=OFF -DTETHER_BUILD_BENCH=OFF -DCMAKE_CUDA_FLAGS=-Xptxas=-v \
  -DCMAKE_CUDA_COMPILER_LAUNCHER="$PWD/bench/ptxas_log.sh" "$@")
[[ $configured == *"cuda backend ON"* ]] || { echo "ptxas_report: the cuda backend is not configured (nvcc not found?)" >&2; exit 1; }
rm -rf "$logs"
mkdir -p "$logs"
# Every unit compiles again so that each log is complete.
TETHER_PTXAS_LOGS="$logs" cmake --build "$dir" --target tether_cuda --clean-first -j"$(nproc)" >/dev/null
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- include src CMakeLists.txt || commit="$commit-dirty"
out="bench/results/ptxas-$(date -u +%F)-$commit"
python3 bench/ptxas_report.py "$logs" --commit "$commit" --command "bench/ptxas_report.sh $*" \
  --nvcc "$("${CUDACXX:-nvcc}" --version | tail -2 | head -1)" -o "$out"
echo "$out.json, $out.md"
