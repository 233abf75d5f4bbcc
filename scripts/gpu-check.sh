#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU and its driver, from the unpacked
# archive of scripts/gpu-bundle.sh (nothing else installed): the gpu tests
# with TETHER_REQUIRE_GPU=1, then cuda against cpu in one run for the run,
# shooting and sampling engines. Raw results, eight files, go to OUTDIR:
#   check.log            what ran, nvidia-smi, each stage's exit status and time
#   test_cuda.xml        the gpu tests (JUnit XML, one entry per test)
#   bench-cuda.json      tether_bench, cuda, sizes 1e3..1e6, every family
#   bench-cpu.json       tether_bench, cpu at 1e4 on the same cases (the ratio's other side)
#   shoot-{cuda,cpu}.json, sample-{cuda,cpu}.json   summary.json of tether shoot / sample
# Each stage has a time limit (together 8 minutes at most); a stage that runs
# out leaves its lines in check.log.
#
#   tar -xJf gpu-bundle.tar.xz && tether-gpu/gpu-check.sh OUTDIR
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: gpu-check.sh OUTDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(realpath -m "$1")
mkdir -p "$out"
log=$out/check.log
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TETHER_CONFIGS="$here/configs" TETHER_REQUIRE_GPU=1
bin=$here/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# stage NAME SECONDS COMMAND...: runs it with a time limit, logs status and time.
stage() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" >>"$log"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - start)) s$([ $rc -eq 124 ] && echo ", stopped at its $limit s limit")" >>"$log"
  [ $rc -eq 0 ] || failed=1
  return 0
}

{
  echo "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  cat "$here/BUILD"
  nvidia-smi 2>&1 || echo "nvidia-smi failed"
} >"$log"

# tether_bench: its JSON goes to -o, not also into the log.
quiet() { "$@" >/dev/null; }
export -f quiet

stage tests 120 "$bin/test_cuda" --gtest_output="xml:$out/test_cuda.xml"
stage bench-cuda 120 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cuda --configs "$here/configs" --sizes 1e3,1e4,1e5,1e6 \
  --repeats 2 --min-time 0.1 -o "$out/bench-cuda.json"
stage bench-cpu 90 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cpu --configs "$here/configs" --sizes 1e4 --repeats 2 \
  --min-time 0.1 -o "$out/bench-cpu.json"
for engine in shoot sample; do
  config=$here/configs/heisenberg_sphere.json
  [ "$engine" = sample ] && config=$here/configs/double_pendulum_sample.json
  for backend in cuda cpu; do
    stage "$engine-$backend" 40 "$bin/tether" "$engine" "$config" --out "$work/$engine-$backend" --backend "$backend" --quiet
    [ -f "$work/$engine-$backend/summary.json" ] && cp "$work/$engine-$backend/summary.json" "$out/$engine-$backend.json"
  done
done
echo "gpu-check: $([ $failed -eq 0 ] && echo "every stage passed" || echo "a stage failed (see check.log)")" | tee -a "$log"
exit $failed
