#!/usr/bin/env bash
# Builds tether_bench (Release) if needed and runs it, saving its JSON to
# bench/results/<date>-<hostname>-<backend-set>[-<family>].json (the -<family>
# suffix when not all families ran, e.g. -nonholonomic or -holonomic+lagrangian).
#
#   bench/run_bench.sh --quick                 # 2-core CPU machine, every family
#   bench/run_bench.sh                         # full grid (reference, cpu, and cuda when a device is present)
#   bench/run_bench.sh --family nonholonomic   # Gauss-Legendre 1/2/3, symplectic Euler, Stormer-Verlet on
#                                              # heisenberg, heisenberg_vakonomic, martinet, martinet_lagrangian,
#                                              # parallel_parking: sizes 1e2,1e3,1e4, minutes on 2 cores
#   bench/run_bench.sh --family holonomic      # the holonomic grid only
#   bench/run_bench.sh --systems rigid_body,kepler --quick   # a few systems, every method that applies
#   bench/run_bench.sh --backends cpu,cuda --systems chain16 --sizes 1e5,1e6
#
# All arguments go to tether_bench (see bench/README.md or `tether_bench --help`).
# Environment:
#   TETHER_BENCH_BUILD_DIR  build folder (default: <repo>/build-bench)
#   TETHER_ENABLE_CUDA      ON/OFF, passed to cmake (default ON: cuda is built when nvcc is found)
#   TETHER_BENCH_JOBS       parallel build jobs (default: nproc)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="${TETHER_BENCH_BUILD_DIR:-$root/build-bench}"
cuda="${TETHER_ENABLE_CUDA:-ON}"
jobs="${TETHER_BENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Configuring every time is cheap and refreshes the git commit the bench records;
# the build itself only recompiles what changed.
echo "[run_bench] configuring $build (Release, cuda=$cuda)" >&2
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTETHER_BUILD_BENCH=ON -DTETHER_BUILD_TESTS=OFF \
      -DTETHER_ENABLE_CUDA="$cuda" >/dev/null
echo "[run_bench] building tether_bench" >&2
cmake --build "$build" --target tether_bench -j "$jobs" >&2

bin="$build/bench/tether_bench"
results="$here/results"
mkdir -p "$results"
tmp="$(mktemp "$results/.partial.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

status=0
"$bin" "$@" >"$tmp" || status=$?
# 0: all points measured; 1: some points failed (listed under "errors"), JSON still written.
if [[ $status -ne 0 && $status -ne 1 ]] || [[ ! -s "$tmp" ]]; then
  echo "[run_bench] tether_bench failed (exit $status); nothing saved" >&2
  exit "$status"
fi

backend_set="$(sed -n 's/^  "backend_set": "\(.*\)",\{0,1\}$/\1/p' "$tmp" | head -n 1)"
# settings.family (the only "family" key indented by four spaces)
family="$(sed -n 's/^    "family": "\(.*\)",\{0,1\}$/\1/p' "$tmp" | head -n 1)"
host="$(hostname 2>/dev/null || uname -n)"
host="${host//[^A-Za-z0-9._-]/_}"
name="$(date +%Y-%m-%d)-${host}-${backend_set:-unknown}"
if [[ -n "$family" && "$family" != all ]]; then name="$name-$family"; fi
out="$results/$name.json"
n=2
while [[ -e "$out" ]]; do out="$results/$name-$n.json"; n=$((n + 1)); done
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "[run_bench] saved $out" >&2
exit "$status"
