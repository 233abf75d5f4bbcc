#!/usr/bin/env bash
# Device call of 2026-11-26 (session 15, second): after the composition
# coefficients moved from a runtime-indexed table to a switch. The gpu tests
# of the composition pairs, then RATTLE and its triple-jump composition on
# cuda beside cpu (16 host threads). Run from the repository root with
# gpu-bundle.tar.xz carried; writes to $OUT.
set -uo pipefail
out=${OUT:?}
tar -xJf gpu-bundle.tar.xz -C /tmp || exit 1
here=/tmp/tether-gpu
export LD_LIBRARY_PATH=$here/lib TETHER_CONFIGS=$here/configs TETHER_REQUIRE_GPU=1
{ cat $here/BUILD; nvidia-smi; } >"$out/machine.txt" 2>&1
start=$SECONDS
OMP_NUM_THREADS=16 timeout -k 5 120 $here/bin/test_cuda --gtest_filter='*omposition*:*yoshida*:*kahan*:*suzuki*:*triple*:CudaSample.*' \
  --gtest_output="xml:$out/test_cuda-composition.xml" 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure"
echo "tests: $((SECONDS - start)) s"
ch=(--systems spherical_pendulum,double_pendulum,chain4,chain8 --methods rattle,composition_rattle --steps 100)
b() { timeout -k 5 "$1" $here/bin/tether_bench --configs $here/configs --repeats 2 --min-time 0.1 "${@:2}"; }
b 60 --backends cuda "${ch[@]}" --sizes 1e4,1e5,1e6 -o "$out/bench-cuda.json" 2>&1 | grep '^\[bench\]'
b 40 --backends cpu "${ch[@]}" --sizes 1e4 -o "$out/bench-cpu.json" 2>&1 | grep '^\[bench\]'
