#!/usr/bin/env bash
# The one device call of 2026-11-26 (session 15), run from the repository root
# with gpu-bundle.tar.xz carried: the gpu tests, then the Gauss-Legendre
# ensemble kernels (now solved in the eigenbasis of A) and the RATTLE chains
# on cuda beside cpu (16 host threads) in the same call. Writes to $OUT.
set -uo pipefail
out=${OUT:?}
tar -xJf gpu-bundle.tar.xz -C /tmp || exit 1
here=/tmp/tether-gpu
export LD_LIBRARY_PATH=$here/lib TETHER_CONFIGS=$here/configs TETHER_REQUIRE_GPU=1
{ cat $here/BUILD; nvidia-smi; nproc; } >"$out/machine.txt" 2>&1
start=$SECONDS
for k in 0 1 2 3; do
  OMP_NUM_THREADS=4 GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$k timeout -k 5 260 $here/bin/test_cuda \
    --gtest_output="xml:$out/test_cuda-$k.xml" >/tmp/tests-$k.log 2>&1 &
done
wait
echo "tests: $((SECONDS - start)) s"
for k in 0 1 2 3; do grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|rror" /tmp/tests-$k.log | sed "s/^/shard $k: /"; done
gl=(--systems heisenberg,martinet,heisenberg_vakonomic,martinet_lagrangian,parallel_parking --methods gauss_legendre_2,gauss_legendre_3 --steps 10)
ch=(--systems spherical_pendulum,chain4,chain16 --methods rattle,composition_rattle --steps 100)
b() { timeout -k 5 "$1" $here/bin/tether_bench --configs $here/configs --repeats 2 --min-time 0.1 "${@:2}"; }
start=$SECONDS
b 110 --backends cuda "${gl[@]}" --sizes 1e4,1e5,1e6 -o "$out/bench-gl-cuda.json" 2>&1 | grep '^\[bench\]'
b 50 --backends cuda "${ch[@]}" --sizes 1e4,1e5,1e6 -o "$out/bench-chain-cuda.json" 2>&1 | grep '^\[bench\]'
b 60 --backends cpu "${gl[@]}" --sizes 1e4 -o "$out/bench-gl-cpu.json" 2>&1 | grep '^\[bench\]'
b 40 --backends cpu "${ch[@]}" --sizes 1e4 -o "$out/bench-chain-cpu.json" 2>&1 | grep '^\[bench\]'
echo "bench: $((SECONDS - start)) s"
