#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU and its driver, from the unpacked
# archive of scripts/gpu-bundle.sh (nothing else installed): the gpu tests
# with TETHER_REQUIRE_GPU=1, then cuda against cpu in one run for the run,
# shooting and sampling engines. Raw results go to OUTDIR:
#   check.log            what ran, nvidia-smi, each stage's exit status and time
#   test_cuda-K.xml      the gpu tests, in 4 shards run at once (JUnit XML, one entry per test)
#                        (check.log: declared systems compiled at first use, run and shot on cuda against cpu)
#   shoot-scaling.jsonl  tether shoot, Heisenberg GL2 at 10^5 and 10^6 random targets on cuda
#                        and 10^5 on cpu: one summary.json per line
#   bench-cuda.json      tether_bench, cuda, sizes 1e4 and 1e6, one or more cases of every family
#   bench-cpu.json       tether_bench, cpu at 1e4 on the same cases (the ratios' other side)
#   bench-chains-{cuda,cpu}.json  tether_bench, every chain method of the SHAKE/RATTLE family,
#                        chain4, chain8 and chain16: cuda at 1e4 and 1e5, cpu at 1e4
#   CONFIG-{cuda,cpu}.json  summary.json of tether shoot / sample on configs/CONFIG.json: heisenberg_sphere,
#                        double_pendulum_sample, fisher_bingham_sample (static), fisher_bingham_dynamic
#   rattle-peers-gpu.json  bench/rattle_peers.py: tether cuda beside hand-written numba.cuda RATTLE
#                        (plain and carrying the force; parameters compiled in and as arguments) and
#                        JAX on the GPU, pendulum 10^6, chains 10^5
#   *-declared-cuda.json  bench/declared_peers.py on cuda: declared pendulum and chain8 against the built-in
#   ncu-{shoot,pendulum,chain8}.txt  Nsight Compute on short launches of the shooting and RATTLE kernels
#   shoot-peers-gpu-{1,25}.json  bench/shoot_peers.py: tether shoot on cuda (80 steps, and shoot.accuracy)
#                        beside JAX (diffrax) on the GPU, the 408 Heisenberg targets and 25 x 408
# Stages run in order of what matters most (the tests first; the declared
# systems compile beside them, neither timed), each under a time limit; a
# stage that runs out is killed with its children and leaves its lines in
# check.log. A device call allows 600 s: run this under `timeout 540` and pack
# OUTDIR after it (the device returns 8 files at most); what comes last (the
# family benches and the shooting scaling) is what a slow run loses. On an H200
# with 16 host cores (2026-11-30) the stages took 362 s, the tests 62 s.
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
export bin here out work  # for the stages run by bash -c
failed=0

# stage NAME SECONDS COMMAND...: runs it with a time limit, logs status and time.
stage() {
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" >>"$log"
  local start=$SECONDS
  # -k: a child that outlives the TERM (tether finishes its batch first) is killed.
  timeout -k 5 "$limit" "$@" >>"$log" 2>&1
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

# The gpu tests in 4 shards at once: each compares cuda with cpu, so one
# shard's cpu part overlaps another's kernels (one after another they took
# about 6 minutes on an H100).
gpu_tests() {
  local k rc=0 threads=$(( $(nproc) / 4 > 0 ? $(nproc) / 4 : 1 ))
  for k in 0 1 2 3; do
    OMP_NUM_THREADS=$threads GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$k "$bin/test_cuda" \
      --gtest_output="xml:$out/test_cuda-$k.xml" >"$work/tests-$k.log" 2>&1 &
  done
  for k in 0 1 2 3; do wait -n || rc=1; done
  for k in 0 1 2 3; do grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|error" "$work/tests-$k.log" | sed "s/^/shard $k: /"; done
  return $rc
}
export -f gpu_tests

# Systems declared in the config, compiled at first use with nvcc on this
# machine (the bundle carries the headers they compile against): water
# (RATTLE, a run) and SE(2) (Gauss-Legendre, shooting) on cuda and on cpu,
# their outputs compared (every number of final.csv to 1e-12, as the gpu
# tests compare built-in pairs; each target's length and covector to 1e-9).
declared_on_cuda() {
  export TETHER_CACHE_DIR=$work/declared-cache
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["method"]["steps"] = 100; c["ensemble"]["batch_size"] = 320
json.dump(c, open(sys.argv[2], "w"))' "$here/configs/water.json" "$work/water.json" || return 1
  local backend pids=() rc=0
  for backend in cuda cpu; do  # each compiles its own pairs (nvcc, g++): at once
    { "$bin/tether" run "$work/water.json" --out "$work/water-$backend" --backend "$backend" --quiet &&
        "$bin/tether" shoot "$here/configs/se2.json" --out "$work/se2-$backend" --backend "$backend" --quiet; } &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  [ $rc -eq 0 ] || return 1
  python3 "$here/tools/same_numbers.py" 1e-12 "$work"/water-{cuda,cpu}/final.csv &&
    python3 "$here/tools/same_numbers.py" 1e-9 "$work"/se2-{cuda,cpu}/shots.csv target,converged,length,p0_0,p0_1,p0_2
}
export -f declared_on_cuda
# The declared systems compile (a core each) while the tests run; its lines join the log after them.
(log=$work/declared.log; failed=0; stage declared-cuda 200 bash -c declared_on_cuda; exit $failed) &
declared=$!
stage tests 150 bash -c gpu_tests
wait $declared || failed=1
cat "$work/declared.log" >>"$log"

# The GPU peers: the device's own numba-cuda and JAX on tether's starts, final
# states compared with tether cuda's; then shooting, tether cuda beside JAX on
# the GPU, at equal accuracy (bench/shoot_peers.py's settings: GL3 80 steps, Dopri8 19).
# JAX takes GPU memory as it needs it, not three quarters of the card at import.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
stage gpu-peers 160 bash -c 'python3 "$0/bench/rattle_peers.py" --tether "$bin/tether" --backend cuda \
  --peers numba_cuda,numba_cuda_fsal,numba_cuda_args,numba_cuda_fsal_args,jax --threads "$(nproc)" --repeats 2 \
  --scale 10 >"$out/rattle-peers-gpu.json"' "$here"
# (2026-11-30, H200: 24 s and 27 s.)
# Each tether case with and without shoot.newton.stall_iterations 5 (a launch
# lasts as long as its slowest shot, and stalled shots were the slowest).
stage shoot-peers-gpu-1 70 bash -c 'python3 "$0/bench/shoot_peers.py" --tether "$bin/tether" --backend cuda \
  --peers tether,jax --jax-platform gpu --steps 80 --accuracy 1e-10 --stall-iterations 0,5 --processes "$(nproc)" \
  --repeats 2 --no-save >"$out/shoot-peers-gpu-1.json"' "$here"
stage shoot-peers-gpu-25 90 bash -c 'python3 "$0/bench/shoot_peers.py" --tether "$bin/tether" --backend cuda \
  --peers tether,jax --jax-platform gpu --steps "" --accuracy 1e-10 --stall-iterations 0,5 --replicate 25 \
  --processes "$(nproc)" --repeats 1 --no-save >"$out/shoot-peers-gpu-25.json"' "$here"

# Declared systems' speed on cuda: the expression-defined pendulum and chain8
# beside the built-in ones (bench/declared_peers.py, pendulum 10^6, chain8 10^5),
# each compiled by nvcc at first use.
stage declared-peers-cuda 150 bash -c 'python3 "$0/bench/declared_peers.py" --tether "$bin/tether" --backend cuda \
  --scale 10 --no-sizes --repeats 2 && cp "$0"/bench/results/*-declared-cuda*.json "$out/"' "$here"

# Nsight Compute on launches short enough for its ~30 replay passes (a 1 s
# shooting launch ran out of 90 s on 2026-11-30): occupancy, warp stalls and
# local memory of the shooting kernel (Heisenberg GL3, 64 targets, 16 steps,
# 3 Newton iterations) and of RATTLE's (pendulum and chain8, 10^5, 50 steps).
profile() {
  local ncu dir=$work/ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "no ncu on this machine"; return 1; }
  mkdir -p "$dir"
  python3 - "$here/configs" "$dir" <<'PY' || return 1
import json, sys
configs, out = sys.argv[1:]
shoot = {"system": {"name": "heisenberg"}, "method": {"name": "gauss_legendre", "stages": 3, "steps": 16},
         "shoot": {"q0": [0, 0, 0], "time": 1.0,
                   "targets": {"random": {"count": 64, "min": [-1, -1, -0.3], "max": [1, 1, 0.3], "seed": 11}},
                   "guesses": {"toward": True}, "newton": {"tolerance": 1e-10, "max_iterations": 3}},
         "backend": "cuda"}
json.dump(shoot, open(f"{out}/shoot.json", "w"))
for name, source in (("pendulum", "spherical_pendulum"), ("chain8", "chain16")):
    c = json.load(open(f"{configs}/{source}.json"))
    if name == "chain8":
        c["system"]["parameters"]["beads"] = 8
    c["method"]["steps"] = 50
    c["ensemble"]["size"] = 100000
    c["output"] = {"every": 50}
    c["backend"] = "cuda"
    json.dump(c, open(f"{out}/{name}.json", "w"))
PY
  local sections=(--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
    --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis)
  "$ncu" --clock-control none --kernel-name regex:shoot_kernel --launch-count 1 "${sections[@]}" \
    "$bin/tether" shoot "$dir/shoot.json" --out "$dir/shoot" --quiet >"$out/ncu-shoot.txt" 2>&1 || return 1
  local name
  for name in pendulum chain8; do
    "$ncu" --clock-control none --kernel-name regex:advance --launch-count 1 "${sections[@]}" \
      "$bin/tether" run "$dir/$name.json" --out "$dir/$name" --quiet >"$out/ncu-$name.txt" 2>&1 || return 1
  done
}
export -f profile
stage ncu 90 bash -c profile

# Every chain method, chain16 in tiles (a lane per bead) and chain4 and chain8 a
# thread each (cuda_backend.cuh), at the sizes where a GPU is full, and the cpu
# at 10^4 in the same call.
chains=(--systems chain4,chain8,chain16 --methods rattle,shake,constrained_midpoint,symplectic_euler_a,symplectic_euler_b,composition_rattle,composition_constrained_midpoint,composition_symplectic_euler)
stage bench-chains-cuda 40 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cuda --configs "$here/configs" "${chains[@]}" \
  --sizes 1e4,1e5 --repeats 2 --min-time 0.1 -o "$out/bench-chains-cuda.json"
stage bench-chains-cpu 40 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cpu --configs "$here/configs" "${chains[@]}" \
  --sizes 1e4 --repeats 2 --min-time 0.1 -o "$out/bench-chains-cpu.json"

# The engines on both backends; the Fisher-Bingham sample static and dynamic
# on one target: steps per second of dynamic over static, on cuda against the
# cpu's, is what trajectories of different lengths in one warp cost.
for job in shoot:heisenberg_sphere sample:double_pendulum_sample sample:fisher_bingham_sample \
  sample:fisher_bingham_dynamic; do
  engine=${job%%:*} config=$here/configs/${job#*:}.json name=${job#*:}
  for backend in cuda cpu; do
    stage "$name-$backend" 15 "$bin/tether" "$engine" "$config" --out "$work/$name-$backend" --backend "$backend" --quiet
    [ -f "$work/$name-$backend/summary.json" ] && cp "$work/$name-$backend/summary.json" "$out/$name-$backend.json"
  done
done

# Every family, its headline cases: the RATTLE chains of the Numba comparison,
# Gauss-Legendre on Heisenberg and the car, Lie-group RATTLE, the mixed and
# Lagrangian systems (every pair at every size takes far longer than a lease).
cases=(--systems spherical_pendulum,chain8,chain16,rigid_chain2,heisenberg,parallel_parking,sphere_contact,magnetic_sphere
  --methods rattle,lie_rattle_cayley,gauss_legendre_2,gauss_legendre_3,rattle_midpoint,variational)
stage bench-cuda 60 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cuda --configs "$here/configs" "${cases[@]}" \
  --sizes 1e4,1e6 --repeats 2 --min-time 0.1 -o "$out/bench-cuda.json"
stage bench-cpu 40 bash -c 'quiet "$@"' _ "$bin/tether_bench" --backends cpu --configs "$here/configs" "${cases[@]}" \
  --sizes 1e4 --repeats 2 --min-time 0.1 -o "$out/bench-cpu.json"

# Shots per second against the number of targets: one config (Heisenberg, GL2,
# 40 steps, the toward guess and one random one), random targets of each count.
shoot_scaling() {
  local backend=$1 count=$2 dir=$work/scaling-$1-$2
  mkdir -p "$dir"
  cat >"$dir/config.json" <<CONFIG
{"system": {"name": "heisenberg"},
 "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
 "shoot": {"q0": [0, 0, 0], "time": 1.0,
   "targets": {"random": {"count": $count, "min": [-1, -1, -0.3], "max": [1, 1, 0.3], "seed": 11}},
   "guesses": {"toward": true, "random": {"count": 1, "scale": 2.0, "seed": 3}},
   "newton": {"tolerance": 1e-10, "max_iterations": 40}}}
CONFIG
  "$bin/tether" shoot "$dir/config.json" --out "$dir/out" --backend "$backend" --quiet &&
    { tr -d '\n' <"$dir/out/summary.json"; echo; } >>"$out/shoot-scaling.jsonl"
  local rc=$?
  rm -rf "$dir"
  return $rc
}
export -f shoot_scaling
# (10^6 targets took 42 s on an H100, its 2 million shots 48k a second.)
stage shoot-scaling-cuda-100000 20 bash -c 'shoot_scaling cuda "$1"' _ 100000
stage shoot-scaling-cuda-1000000 60 bash -c 'shoot_scaling cuda "$1"' _ 1000000
stage shoot-scaling-cpu-100000 30 bash -c 'shoot_scaling cpu "$1"' _ 100000


echo "gpu-check: $([ $failed -eq 0 ] && echo "every stage passed" || echo "a stage failed (see check.log)")" | tee -a "$log"
exit $failed
