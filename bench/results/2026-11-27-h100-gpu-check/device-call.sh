#!/usr/bin/env bash
# The device call of 2026-11-27 (session 20), run from the repository root with
# .gpu/ carried (gpu-bundle.tar.xz, repacked with bin/tether-noinline: the same tether with the
# shooting flow's step out of line in the Gauss-Legendre unit). Writes to $OUT:
# the gpu tests (the replay of a composition's failed step and HMC's chain slot
# are new since the last lease), the RATTLE chains and their compositions on cuda
# at 10^5 and 10^6, HMC sampling on chain4 and chain16 on cuda and cpu, and Gauss-Legendre
# shooting with the step inlined and out of line.
set -uo pipefail
out=${OUT:?}
log=$out/device-call.log
exec > >(tee "$log") 2>&1
tar -xJf .gpu/gpu-bundle.tar.xz -C /tmp || exit 1
here=/tmp/tether-gpu
export LD_LIBRARY_PATH=$here/lib TETHER_CONFIGS=$here/configs TETHER_REQUIRE_GPU=1
{ cat $here/BUILD; nvidia-smi; nproc; } >"$out/machine.txt" 2>&1
start=$SECONDS
for k in 0 1 2 3; do
  OMP_NUM_THREADS=4 GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$k timeout -k 5 150 $here/bin/test_cuda \
    --gtest_output="xml:/tmp/test_cuda-$k.xml" >/tmp/tests-$k.log 2>&1 &
  pids="${pids:-} $!"
done
wait $pids  # not a bare wait: that waits for the tee above too
echo "tests: $((SECONDS - start)) s"
for k in 0 1 2 3; do grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is|rror" /tmp/tests-$k.log | sed "s/^/shard $k: /"; done
tar -C /tmp -czf "$out/test_cuda-xml.tar.gz" test_cuda-0.xml test_cuda-1.xml test_cuda-2.xml test_cuda-3.xml

ch=(--systems spherical_pendulum,chain4,chain8,chain16 --steps 100
  --methods rattle,composition_rattle,composition_constrained_midpoint,composition_symplectic_euler)
b() { timeout -k 5 "$1" $here/bin/tether_bench --configs $here/configs --repeats 2 --min-time 0.1 "${@:2}"; }
start=$SECONDS
b 40 --backends cuda "${ch[@]}" --sizes 1e6 -o "$out/bench-chain-cuda.json" 2>&1 | grep '^\[bench\]'
echo "bench: $((SECONDS - start)) s"

# HMC: chain_kernel (chain4's 224 B of spills, chain16's 12.6 KB), cuda and cpu.
start=$SECONDS
for beads in 4; do
  for run in cuda:100000; do
    backend=${run%%:*} chains=${run##*:}
    [ "$beads" = 16 ] && chains=$((chains / 10))
    d=/tmp/sample-$beads-$backend-$chains; mkdir -p $d
    cat >$d/c.json <<CONFIG
{"system": {"name": "chain", "parameters": {"beads": $beads, "mass": 1.0, "bond_length": 1.0, "bend_stiffness": 60.0,
   "bend_angle_degrees": 112.0, "torsion": [1.116, 1.462, -1.578, -0.368, 3.156, -3.788]}},
 "method": {"name": "rattle", "dt": 0.02, "steps": 10, "newton": {"tolerance": 1e-13, "max_iterations": 50}},
 "sample": {"chains": $chains, "draws": 20, "thin": 50, "warmup": 50, "seed": 5, "temperature": 1.0,
   "jitter": {"dt": 0.1, "steps": 0.2}}}
CONFIG
    timeout -k 5 60 $here/bin/tether sample $d/c.json --out $d/o --backend $backend --quiet
    echo "sample chain$beads $backend $chains: exit $? after $((SECONDS - start)) s"
    [ -f $d/o/summary.json ] && { tr -d '\n' <$d/o/summary.json; echo; } >>"$out/sample.jsonl"
    rm -rf $d
  done
done

# Shooting: Heisenberg GL1/GL2/GL3 and Martinet GL2, random targets, inlined
# step (the bundle) and out of line (tether-noinline), alternating.
start=$SECONDS
for rep in 1; do
  for sm in heisenberg:1:100000 heisenberg:2:100000 heisenberg:3:30000; do
    IFS=: read -r sys stages count <<<"$sm"
    for variant in inline noinline; do
      bin=$here/bin/tether; [ $variant = noinline ] && bin=$here/bin/tether-noinline
      d=/tmp/shoot-$sys-$stages-$variant; mkdir -p $d
      cat >$d/c.json <<CONFIG
{"system": {"name": "$sys"}, "method": {"name": "gauss_legendre", "stages": $stages, "steps": 40},
 "shoot": {"q0": [0, 0, 0], "time": 1.0,
   "targets": {"random": {"count": $count, "min": [-1, -1, -0.3], "max": [1, 1, 0.3], "seed": 11}},
   "guesses": {"toward": true, "random": {"count": 1, "scale": 2.0, "seed": 3}},
   "newton": {"tolerance": 1e-10, "max_iterations": 40}}}
CONFIG
      timeout -k 5 60 $bin shoot $d/c.json --out $d/o --backend cuda --quiet
      rc=$?
      [ -f $d/o/summary.json ] && python3 -c "import json,sys; d=json.load(open('$d/o/summary.json')); d['variant']='$variant'; d['rep']=$rep; print(json.dumps(d))" >>"$out/shoot.jsonl"
      echo "shoot $sys GL$stages $variant rep $rep: exit $rc after $((SECONDS - start)) s"
      rm -rf $d
    done
  done
done
echo "done"
