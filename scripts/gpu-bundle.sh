#!/usr/bin/env bash
# Builds, on a machine with nvcc (no GPU needed), everything a GPU machine with
# only an NVIDIA driver needs to test and benchmark tether, and packs it into
# one archive: `tether`, the gpu tests (test_cuda) and the benchmark
# (tether_bench), with kernels compiled to sm_90 machine code; the shared
# libraries they load beyond the C library and the driver; the example
# configs; the headers declared systems compile against there (with nvcc and
# g++, which it has); and scripts/gpu-check.sh, which runs it all there.
#
#   scripts/gpu-bundle.sh [ARCHIVE]     default: gpu-bundle.tar.xz in the repo root
#
# The build goes to build-gpu/ (ccache makes a rebuild after a small change
# quick). The archive is refused above 60 MB, so that it can travel to a
# borrowed GPU machine with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
archive=$(realpath -m "${1:-gpu-bundle.tar.xz}")
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
command -v nvcc >/dev/null 2>&1 || [ -n "${CUDACXX:-}" ] || { echo "gpu-bundle: nvcc not found" >&2; exit 1; }
scripts/install-deps.sh

# No MPI in the bundle: it runs as one process and carries no libmpi.
log=$(mktemp)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTETHER_CPU_ARCH= -DTETHER_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DTETHER_CUDA_COMPILE_CHECK=OFF -DTETHER_BUILD_TESTS=ON -DTETHER_BUILD_BENCH=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$log" 2>&1 ||
  { cat "$log"; rm -f "$log"; exit 1; }
grep -q "cuda backend ON" "$log" || { cat "$log"; rm -f "$log"; echo "gpu-bundle: the cuda backend is not built" >&2; exit 1; }
rm -f "$log"
cmake --build build-gpu -j"$(nproc)" --target tether test_cuda tether_bench

stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
stage=$stage_root/tether-gpu
mkdir -p "$stage/bin" "$stage/lib"
cp build-gpu/tether build-gpu/tests/test_cuda build-gpu/bench/tether_bench "$stage/bin/"
strip --strip-unneeded "$stage"/bin/*
# Every shared library the binaries resolve here, except glibc's own, the
# dynamic loader, the CUDA driver (the GPU machine has its own, matching its
# kernel module) and the C++ compiler's runtime (libstdc++, libgcc_s, libgomp):
# the GPU machine compiles declared systems with its own g++, whose libraries
# the compiled pair needs (a pair built there did not load beside this
# machine's older libstdc++: GLIBCXX_3.4.31 not found), and which run these
# binaries too, being newer.
for b in "$stage"/bin/*; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*|libcuda|libstdc\+\+|libgcc_s|libgomp)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
cp -r configs "$stage/configs"
cp scripts/gpu-check.sh "$stage/"
# The headers a declared system compiles against at first use, with Eigen and
# nlohmann/json (the GPU machine has neither), where bin/tether looks for
# them: bin/../share/tether/compile, as `cmake --install` puts them.
cmake --install build-gpu --prefix "$stage_root/installed" >/dev/null
mkdir -p "$stage/share/tether" "$stage/tools"
cp -r "$stage_root/installed/share/tether/compile" "$stage/share/tether/"
cp tools/same_numbers.py "$stage/tools/"
mkdir -p "$stage/bench/results"  # the GPU peers (numba.cuda, JAX; RATTLE and shooting) run from the bundle by gpu-check.sh
cp bench/rattle_peers.py bench/run_shoot_bench.py bench/shoot_peers.py bench/declared_peers.py "$stage/bench/"
{
  echo "commit $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  "${CUDACXX:-nvcc}" --version | tail -n 2
} >"$stage/BUILD"
# xz -9e: the binaries share most of their bytes, which its 64 MiB window finds
# (at 6a0814a: 54 MB for the three at xz's default level; 44 MB for them and a
# fourth, a variant of tether, at -9e).
# The three binaries each hold the same kernels (46 MB of .nv_fatbin): a
# dictionary larger than the whole tar (one block, so one thread) lets xz
# store them once.
tar -C "$stage_root" -cf - tether-gpu | xz -T1 --lzma2=preset=9e,dict=256MiB >"$archive"
bytes=$(stat -c %s "$archive")
if [ "$bytes" -gt 60000000 ]; then
  rm -f "$archive"
  echo "gpu-bundle: the archive would be $((bytes / 1000000)) MB, over 60 MB; nothing written" >&2
  exit 1
fi
echo "gpu-bundle: $archive ($((bytes / 1000000)) MB): on the GPU machine, tar -xJf it and run tether-gpu/gpu-check.sh OUTDIR"
