#!/usr/bin/env bash
# `mpirun -np K tether run` against one process, byte for byte (summary.json
# but for its timings), for K = 2 and 3 on a 2-core machine (oversubscribed),
# CSV with snapshots and a batch size that straddles the shards' slices; and
# `mpirun -np K tether sample` against one process (summary.json, whose
# diagnostics are computed from all of draws.nc, but for its timings); and
# `mpirun -np K tether shoot` against one process, byte for byte, also
# killed or stopped and resumed from its checkpoints.
# Usage: mpi_check.sh TETHER MPIRUN WORKDIR
set -euo pipefail
tether=$1 mpirun=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
cat > config.json <<'JSON'
{"system": {"name": "spherical_pendulum"}, "method": {"name": "rattle", "dt": 0.01, "steps": 40},
 "ensemble": {"size": 9000, "seed": 4, "batch_size": 1500, "initial": {"sampler": "thermal", "temperature": 0.5}},
 "output": {"every": 10, "trajectories": {"ids": [0, 4500, 8999], "every": 20}}, "backend": "cpu"}
JSON
"$tether" run config.json --out single --quiet --threads 1
# Root in a container needs OpenMPI's consent; a login user does not.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
strip_timings() { grep -v -E '"(wall_seconds|integration_seconds|trajectory_steps_per_second)"' "$1"; }
for ranks in 2 3; do
  "$mpirun" -np "$ranks" "$tether" run config.json --out "mpi$ranks" --quiet --threads 1
  for f in final.csv timeseries.csv trajectories.csv; do
    cmp "single/$f" "mpi$ranks/$f" || { echo "mpirun -np $ranks: $f differs from the single-process run"; exit 1; }
  done
  diff <(strip_timings single/summary.json) <(strip_timings "mpi$ranks/summary.json") ||
    { echo "mpirun -np $ranks: summary.json differs beyond its timings"; exit 1; }
  [ ! -e "mpi$ranks/.shards" ] || { echo "mpirun -np $ranks left its shard folders"; exit 1; }
done
# More ranks than 4096-trajectory slices: the extra ranks' shards are empty.
sed -e 's/"size": 9000/"size": 100/' -e 's/\[0, 4500, 8999\]/[0, 50, 99]/' config.json > small.json
"$tether" run small.json --out small_single --quiet --threads 1
"$mpirun" -np 2 "$tether" run small.json --out small_mpi --quiet --threads 1
for f in final.csv timeseries.csv trajectories.csv; do
  cmp "small_single/$f" "small_mpi/$f" || { echo "mpirun -np 2 on 100 trajectories: $f differs"; exit 1; }
done
cat > sample.json <<'JSON'
{"system": {"name": "spherical_pendulum"}, "method": {"name": "rattle", "dt": 0.1, "steps": 5},
 "sample": {"chains": 7, "draws": 25, "warmup": 10, "thin": 2, "seed": 3, "batch_size": 3}, "backend": "cpu"}
JSON
"$tether" sample sample.json --out sample_single --quiet --threads 1
strip_sample() { grep -v -E '"(wall_seconds|sampling_seconds|chain_iterations_per_second|min_ess_bulk_per_second)"' "$1"; }
for ranks in 2 3; do
  "$mpirun" -np "$ranks" "$tether" sample sample.json --out "sample_mpi$ranks" --quiet --threads 1
  [ -e "sample_mpi$ranks/draws.nc" ] || { echo "mpirun -np $ranks tether sample wrote no draws.nc"; exit 1; }
  diff <(strip_sample sample_single/summary.json) <(strip_sample "sample_mpi$ranks/summary.json") ||
    { echo "mpirun -np $ranks tether sample: summary.json differs beyond its timings"; exit 1; }
done
# tether shoot under mpirun: a team that shares out each phase's shots (the
# guesses of two accuracy passes; continuation rounds that solve 26 targets
# from poor guesses) writes one process's files.
cat > shoot_passes.json <<'JSON'
{"system": {"name": "heisenberg"}, "method": {"name": "gauss_legendre", "stages": 2},
 "shoot": {"q0": [0, 0, 0], "time": 1.0, "accuracy": 1e-8,
           "targets": {"grid": {"min": [-1.2, 0, -0.4], "max": [1.2, 0, 0.4], "count": [9, 1, 7]}},
           "guesses": {"toward": true, "random": {"count": 4, "scale": 2.0, "seed": 1}},
           "newton": {"tolerance": 1e-12, "max_iterations": 40}, "continuation": {"rounds": 2, "substeps": 4}},
 "output": {"geodesics": {"every": 4, "targets": 20}}, "backend": "cpu"}
JSON
sed -e 's/"stages": 2}/"stages": 2, "steps": 16}/' -e 's/"accuracy": 1e-8,//' \
    -e 's/"toward": true, "random": {"count": 4, "scale": 2.0/"toward": false, "random": {"count": 1, "scale": 6.0/' \
    shoot_passes.json > shoot_rounds.json
strip_shoot() { grep -v -E '"(wall_seconds|shooting_seconds|shots_per_second)"' "$1"; }
for config in shoot_passes shoot_rounds; do
  "$tether" shoot "$config.json" --out "${config}_single" --quiet --threads 1
  for ranks in 2 3; do
    "$mpirun" -np "$ranks" "$tether" shoot "$config.json" --out "${config}_mpi$ranks" --quiet --threads 1
    for f in shots.csv geodesics.csv; do
      cmp "${config}_single/$f" "${config}_mpi$ranks/$f" || { echo "mpirun -np $ranks tether shoot $config: $f differs"; exit 1; }
    done
    diff <(strip_shoot "${config}_single/summary.json") <(strip_shoot "${config}_mpi$ranks/summary.json") ||
      { echo "mpirun -np $ranks tether shoot $config: summary.json differs beyond its timings"; exit 1; }
  done
done
# A shoot team's checkpoints: its ranks killed (SIGKILL, a lost node) or
# stopped (SIGTERM: they stop together, rank 0 writes a last checkpoint)
# after the first checkpoint, then resumed by as many ranks: one process's
# files. A team of another size refuses the checkpoint.
sed -e 's/"count": \[9, 1, 7\]/"count": [25, 1, 17]/' -e 's/"output": {/"output": {"checkpoint": {"every": 20}, /' \
    shoot_passes.json > shoot_cp.json
"$tether" shoot shoot_cp.json --out shoot_cp_single --quiet --threads 1
for signal in KILL TERM; do
  out=shoot_cp_$signal
  "$mpirun" -np 2 "$tether" shoot shoot_cp.json --out "$out" --quiet --threads 1 2> "$out.err" & pid=$!
  for i in $(seq 600); do [ -e "$out/checkpoint.tether" ] || [ -e "$out/summary.json" ] && break; sleep 0.05; done
  pkill "-$signal" -f "^$tether shoot shoot_cp.json --out $out " || true  # the ranks, not mpirun
  wait $pid && { echo "mpirun -np 2 tether shoot: not stopped by SIG$signal (finished first?)"; exit 1; }
  [ -e "$out/checkpoint.tether" ] && [ ! -e "$out/shots.csv" ] ||
    { echo "SIG$signal: no checkpoint, or output that looks complete:"; ls "$out"; cat "$out.err"; exit 1; }
  if [ "$signal" = TERM ]; then
    grep -q "stopped by SIGTERM: checkpoint written" "$out.err" || { echo "SIGTERM said nothing:"; cat "$out.err"; exit 1; }
  fi
  "$mpirun" -np 2 "$tether" shoot shoot_cp.json --out "$out" --quiet --threads 1 --resume
  cmp shoot_cp_single/shots.csv "$out/shots.csv" || { echo "SIG$signal, resumed by 2 ranks: shots.csv differs"; exit 1; }
  diff <(strip_shoot shoot_cp_single/summary.json) <(strip_shoot "$out/summary.json") ||
    { echo "SIG$signal, resumed by 2 ranks: summary.json differs beyond its timings"; exit 1; }
done
"$mpirun" -np 2 "$tether" shoot shoot_cp.json --out shoot_cp_3 --quiet --threads 1 & pid=$!
for i in $(seq 600); do [ -e shoot_cp_3/checkpoint.tether ] || [ -e shoot_cp_3/summary.json ] && break; sleep 0.05; done
pkill -KILL -f "^$tether shoot shoot_cp.json --out shoot_cp_3 " || true
wait $pid || true
set +e
"$mpirun" -np 3 "$tether" shoot shoot_cp.json --out shoot_cp_3 --quiet --threads 1 --resume 2> shoot_cp_3.err
code=$?
set -e
[ "$code" -eq 2 ] && [ "$(grep -c '^error: ' shoot_cp_3.err)" -eq 1 ] &&
  grep -q "^error: config error at --resume: the checkpoint was written by a team of 2: resume it with as many (mpirun -np 2), not 3" shoot_cp_3.err &&
  [ ! -e shoot_cp_3/shots.csv ] || { echo "3 ranks resumed 2 ranks' checkpoint (exit $code):"; cat shoot_cp_3.err; exit 1; }
# A stopped `mpirun -np 2 tether run`: rank 0 says to go on with the same
# mpirun and --resume (not with a shard's own folder), once, and that goes on
# to one process's files.
sed -e 's/"steps": 40}/"steps": 3000}/' -e 's/"output": {"every": 10,/"output": {"checkpoint": {"every": 50}, "every": 500,/' \
    config.json > run_cp.json
"$tether" run run_cp.json --out run_cp_single --quiet --threads 1
"$mpirun" -np 2 "$tether" run run_cp.json --out run_cp --quiet --threads 1 2> run_cp.err & pid=$!
for i in $(seq 600); do [ -e run_cp/.shards/0/checkpoint.tether ] || [ -e run_cp/summary.json ] && break; sleep 0.05; done
pkill -TERM -f "^$tether run run_cp.json --out run_cp " || true
wait $pid && { echo "mpirun -np 2 tether run: not stopped by SIGTERM (finished first?)"; exit 1; }
[ "$(grep -c 'go on with `mpirun -np 2 tether run run_cp.json --out run_cp --resume`' run_cp.err)" -eq 1 ] &&
  ! grep -q "\.shards" run_cp.err || { echo "a stopped mpirun tether run pointed elsewhere:"; cat run_cp.err; exit 1; }
"$mpirun" -np 2 "$tether" run run_cp.json --out run_cp --quiet --threads 1 --resume
for f in final.csv timeseries.csv trajectories.csv; do
  cmp "run_cp_single/$f" "run_cp/$f" || { echo "mpirun -np 2, stopped and resumed: $f differs"; exit 1; }
done
# A bad config: exit 2, said once.
echo '{"system": {"name": "spherical_pendulum"}}' > bad.json
set +e
"$mpirun" -np 2 "$tether" run bad.json --out bad --quiet 2> bad.err
code=$?
set -e
[ "$code" -ne 0 ] || { echo "a bad config passed under mpirun"; exit 1; }
[ "$(grep -c '^error:' bad.err)" -eq 1 ] || { echo "the bad config's error was not said exactly once:"; cat bad.err; exit 1; }
[ ! -e bad/summary.json ] || { echo "a bad config left a summary"; exit 1; }
echo "mpirun -np 2 and 3 match the single-process run, sample and shoot (and -np 2 on 100 trajectories, one shard empty)"
