#!/usr/bin/env bash
# Second device call: the gpu tests the first call's 120 s limit cut off (4 shards
# at once), then shots/s at 1e6 targets, then a cuda+cpu bench of the heavy cases.
set -u
start=$SECONDS
mkdir -p /tmp/b && tar -xJf .gpu/gpu-bundle.tar.xz -C /tmp/b
g=/tmp/b/tether-gpu; bin=$g/bin
export LD_LIBRARY_PATH=$g/lib TETHER_CONFIGS=$g/configs TETHER_REQUIRE_GPU=1
filter=$(cat .gpu/filter)
for k in 0 1 2 3; do
  OMP_NUM_THREADS=4 GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$k timeout -k 5 170 "$bin/test_cuda" --gtest_filter="$filter" \
    --gtest_output="xml:$OUT/test_cuda_rest_$k.xml" >"$OUT/tests_$k.log" 2>&1 &
done
wait
echo "tests done after $((SECONDS - start)) s"
grep -h "PASSED\|FAILED\|OK \]" "$OUT"/tests_*.log | grep -c "OK \]"
grep -h "FAILED\|Failure" "$OUT"/tests_*.log | head -40
left=$((300 - (SECONDS - start)))
echo "left $left s"
if [ $left -gt 40 ]; then
  timeout -k 5 $((left - 35 > 60 ? 60 : left - 35)) "$bin/tether_bench" --backends cuda,cpu --configs "$g/configs" \
    --systems chain16,heisenberg,parallel_parking,rigid_chain2 --methods rattle,gauss_legendre_2,gauss_legendre_3,lie_rattle_cayley \
    --sizes 1e3,1e4,1e5 --repeats 2 --min-time 0.1 -o "$OUT/bench-heavy.json" >/dev/null 2>"$OUT/bench-heavy.log"
  echo "bench rc=$? after $((SECONDS - start)) s"
fi
left=$((300 - (SECONDS - start)))
if [ $left -gt 30 ]; then
  d=/tmp/s6; mkdir -p $d
  cat >$d/c.json <<CONFIG
{"system": {"name": "heisenberg"}, "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
 "shoot": {"q0": [0, 0, 0], "time": 1.0,
   "targets": {"random": {"count": 1000000, "min": [-1, -1, -0.3], "max": [1, 1, 0.3], "seed": 11}},
   "guesses": {"toward": true, "random": {"count": 1, "scale": 2.0, "seed": 3}},
   "newton": {"tolerance": 1e-10, "max_iterations": 40}}}
CONFIG
  timeout -k 5 $((left - 5)) "$bin/tether" shoot $d/c.json --out $d/o --backend cuda --quiet
  echo "shoot 1e6 rc=$? after $((SECONDS - start)) s"
  cp $d/o/summary.json "$OUT/shoot-scaling-cuda-1e6.json" 2>/dev/null
fi
echo "total $((SECONDS - start)) s"
