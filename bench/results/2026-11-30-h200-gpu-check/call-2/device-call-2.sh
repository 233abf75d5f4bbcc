#!/usr/bin/env bash
# The second device call of 2026-11-30 (session 40), from the repository root
# with gpu-bundle.tar.xz carried (scripts/gpu-bundle.sh after the first call's
# fixes). It checks those fixes and measures what the first call lost:
#   1. CudaSample.* (the dynamic sampler's test now records how far cpu and cuda draws drift);
#   2. the declared stage of gpu-check.sh (the bundle no longer carries libstdc++);
#   3. bench/rattle_peers.py on the GPU (numba-cuda there needs np.row_stack, gone from NumPy 2.5);
#   4. bench/shoot_peers.py, tether cuda beside JAX on the GPU, with shoot.accuracy as well;
#   5. sampling at 10^5 chains, static and dynamic, cuda and cpu;
#   6. ncu on the shooting kernel (and, to compare, Gauss-Legendre's run kernel on the same system).
set -uo pipefail
out=${OUT:?}
work=/tmp/call2
mkdir -p "$work"
exec > >(tee "$out/call2.log") 2>&1
tar -xJf gpu-bundle.tar.xz -C /tmp || exit 1
g=/tmp/tether-gpu
cp scripts/gpu-check.sh "$g/"
cp bench/rattle_peers.py bench/run_shoot_bench.py bench/shoot_peers.py "$g/bench/"
export LD_LIBRARY_PATH=$g/lib TETHER_CONFIGS=$g/configs TETHER_REQUIRE_GPU=1 XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
cat "$g/BUILD"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
python3 -c 'import numpy, numba, jax; print("numpy", numpy.__version__, "numba", numba.__version__, "jax", jax.__version__)'
python3 -m pip show numba-cuda 2>/dev/null | head -2
t() { echo "== $1: exit $2 after $(( SECONDS - start )) s"; }
# Every limit is cut to what is left of 380 s, so that the results are packed
# before the device call's own limit.
deadline=$((SECONDS + 380))
lim() { local r=$((deadline - SECONDS)); echo $(( r < $1 ? (r > 1 ? r : 1) : $1 )); }

start=$SECONDS
timeout -k 5 "$(lim 60)" "$g/bin/test_cuda" --gtest_filter='CudaSample.*' --gtest_output="xml:$work/test_cuda_sample.xml" |
  grep -E "^\[  (PASSED|FAILED)|Failure|Expected|Which is|apart"
t tests $?
grep -o 'draws_and_inverse_metric_apart_[a-z_]*="[^"]*"' "$work/test_cuda_sample.xml"

start=$SECONDS
(
  export TETHER_CACHE_DIR=$work/declared-cache
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["method"]["steps"] = 100; c["ensemble"]["batch_size"] = 320
json.dump(c, open(sys.argv[2], "w"))' "$g/configs/water.json" "$work/water.json" || exit 1
  pids=()
  for b in cuda cpu; do
    { timeout -k 5 "$(lim 100)" "$g/bin/tether" run "$work/water.json" --out "$work/water-$b" --backend $b --quiet &&
        timeout -k 5 "$(lim 100)" "$g/bin/tether" shoot "$g/configs/se2.json" --out "$work/se2-$b" --backend $b --quiet; } &
    pids+=($!)
  done
  wait "${pids[0]}" && wait "${pids[1]}" || exit 1
  python3 "$g/tools/same_numbers.py" 1e-12 "$work"/water-{cuda,cpu}/final.csv &&
    python3 "$g/tools/same_numbers.py" 1e-9 "$work"/se2-{cuda,cpu}/shots.csv target,converged,length,p0_0,p0_1,p0_2
)
t declared-cuda $?

start=$SECONDS
timeout -k 5 "$(lim 150)" python3 "$g/bench/rattle_peers.py" --tether "$g/bin/tether" --backend cuda \
  --peers numba_cuda,numba_cuda_fsal,jax --threads "$(nproc)" --repeats 2 --scale 10 >"$work/rattle-peers-gpu.json"
t gpu-peers $?

start=$SECONDS
timeout -k 5 "$(lim 60)" python3 "$g/bench/shoot_peers.py" --tether "$g/bin/tether" --backend cuda --peers tether,jax \
  --jax-platform gpu --steps 80 --accuracy 1e-10 --processes "$(nproc)" --repeats 2 --no-save >"$work/shoot-peers-gpu-1.json"
t shoot-peers-gpu-1 $?
start=$SECONDS
timeout -k 5 "$(lim 100)" python3 "$g/bench/shoot_peers.py" --tether "$g/bin/tether" --backend cuda --peers tether,jax \
  --jax-platform gpu --steps "" --accuracy 1e-10 --replicate 25 --processes "$(nproc)" --repeats 1 --no-save \
  >"$work/shoot-peers-gpu-25.json"
t shoot-peers-gpu-25 $?

# Sampling where a GPU is full: the Fisher-Bingham sample static (8 steps) and
# dynamic, 10^5 chains, on cuda and on cpu (all cores): chain iterations and
# bulk ESS per second, and dynamic's cost against static's on each backend.
for name in fisher_bingham_sample fisher_bingham_dynamic; do
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["sample"].update(chains=100000, draws=100, warmup=100)
json.dump(c, open(sys.argv[2], "w"))' "$g/configs/$name.json" "$work/$name.json"
  for b in cuda cpu; do
    start=$SECONDS
    timeout -k 5 "$(lim 40)" "$g/bin/tether" sample "$work/$name.json" --out "$work/$name-$b" --backend $b --quiet
    t "$name-1e5-$b" $?
    cp "$work/$name-$b/summary.json" "$work/$name-1e5-$b.json" 2>/dev/null
    rm -rf "$work/$name-$b"
  done
done

# Why the shooting kernel is slow: its occupancy, stalls and local memory,
# on the 408-target problem at GL3 16 steps (shoot.accuracy's first pass).
start=$SECONDS
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
python3 - "$work/shoot16.json" <<'PY'
import json, sys
c = json.load(open("/tmp/tether-gpu/configs/heisenberg_sphere.json"))
c["method"] = {"name": "gauss_legendre", "stages": 3, "steps": 16}
c.pop("output", None); c["shoot"].pop("continuation", None); c["backend"] = "cuda"
json.dump(c, open(sys.argv[1], "w"))
PY
sections=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
  --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis)
timeout -k 5 "$(lim 90)" "$ncu" --clock-control none --target-processes all --kernel-name regex:shoot_kernel --launch-count 1 \
  "${sections[@]}" "$g/bin/tether" shoot "$work/shoot16.json" --out "$work/shoot16" --quiet >"$work/ncu-shoot.txt" 2>&1
t ncu-shoot $?
timeout -k 5 "$(lim 60)" "$ncu" --clock-control none --kernel-name regex:advance_kernel --launch-count 1 "${sections[@]}" \
  "$g/bin/tether_bench" --backends cuda --configs "$g/configs" --systems heisenberg --methods gauss_legendre_3 \
  --sizes 1e5 --repeats 1 --min-time 0 -o "$work/bench-ncu.json" >"$work/ncu-run.txt" 2>&1
t ncu-run $?
tar -C /tmp -czf "$out/call2.tgz" --exclude=call2/declared-cache --exclude='call2/water-*' --exclude='call2/se2-*' \
  --exclude=call2/shoot16 call2
echo done
