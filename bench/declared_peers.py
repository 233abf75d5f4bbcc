#!/usr/bin/env python3
"""Systems declared as expressions (README, "Your own system") beside the built-in systems
they spell out, on the cpu backend (or cuda), in one run.

    bench/declared_peers.py --tether build/tether          # saves bench/results/<date>-<host>-declared.json
    bench/declared_peers.py --tether build/tether --quick  # a smaller run, not saved
    bench/declared_peers.py --backend cuda --scale 10 --no-sizes --repeats 2   # on a GPU machine

Cases: the spherical pendulum (10^5 trajectories, dt 0.01, 1000 steps) and the united-atom
chain of configs/chain16.json with 8 beads (10^4 trajectories, dt 0.002, 1000 steps: bonds
held, bending and Ryckaert-Bellemans torsion, declared once for any size as chain.hpp computes
them, configs/bead_chain.json), RATTLE, Newton tolerance 1e-13, the same "around" start for both (a declared system
has no thermal sampler). For each: trajectory-steps per second of both (their own
integration_seconds, best of --repeats interleaved runs) and the ratio; the largest
difference of their final q and p, and the same on a tenth of the trajectories with Newton
solving to its floor (tolerance 1e-15), after a fifth of the steps and after all: what is
left there is roundoff, grown by the dynamics; the first-use compile (wall seconds of a tiny run with an
empty cache, minus the same run cached) and what a cached start adds to a tiny run against
the built-in system's. Then configs/bead_chain.json with 5, 12, 32 and 64 beads (the chain's
parameters): a tiny run's wall seconds at first use and cached, and 1000 trajectories x 200
steps' speed and largest |g|.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_shoot_bench import ROOT, build_of, provenance, read_final_states, save_result  # noqa: E402

TOL, MAX_IT = 1e-13, 50
# Newton's floor: max |g| <= 16 eps max|q| (rattle.hpp), what the agreement runs solve to.
FLOOR_TOL = 1e-15


def declared_pendulum():
    return {"declare": {"name": "declared_pendulum", "coordinates": ["x", "y", "z"],
                        "parameters": {"m": 1.0, "g": 9.81, "L": 1.0}, "mass": 1.0,
                        "potential": "m * g * z", "constraints": ["(x^2 + y^2 + z^2 - L^2) / (2 * L)"],
                        "length_scale": "L", "energy_scale": "m * g * L"}}


def builtin_pendulum():
    return {"name": "spherical_pendulum", "parameters": {"mass": 1.0, "length": 1.0, "gravity": 9.81}}


def declared_chain(beads, p):
    """tether's chain (include/tether/systems/chain.hpp) as configs/bead_chain.json declares it, once for
    any size: bonds d_i = r_{i+1} - r_i, g_i = (|d_i|^2 - b^2) / (2b), k/2 (cos theta - cos theta0)^2 with
    cos theta = -d_i.d_{i+1} / (|d_i||d_{i+1}|), and sum_n c_n cos^n psi with cos psi = -cos phi,
    cos phi = n_i.n_{i+1} / (|n_i||n_{i+1}|), n_i = d_i x d_{i+1}; here with `beads` beads and the chain's
    parameters `p`, set as `system.parameters` (no compile for them), without the pulling force."""
    with open(os.path.join(ROOT, "configs", "bead_chain.json")) as f:
        declaration = json.load(f)["system"]["declare"]
    declaration["sizes"]["N"] = beads
    declaration["mass"] = p["mass"]
    return {"declare": declaration,
            "parameters": {"b": p["bond_length"], "k": p["bend_stiffness"], "f": 0.0,
                           "c0": math.cos(math.radians(p["bend_angle_degrees"])),
                           **{f"t{n}": c for n, c in enumerate(p["torsion"])}}}


def zigzag(beads, p):
    """A chain state on the manifold: bonds of length b in the x-y plane at the rest angle."""
    half = math.radians(p["bend_angle_degrees"]) / 2
    q = []
    for i in range(beads):
        q += [i * p["bond_length"] * math.sin(half), (i % 2) * p["bond_length"] * math.cos(half), 0.0]
    return q


def cases(quick):
    with open(os.path.join(ROOT, "configs", "chain16.json")) as f:
        chain = json.load(f)["system"]["parameters"]
    k = 10 if quick else 1
    pendulum_start = {"sampler": "around", "q": [0.6, 0.0, -0.8], "p": [0.0, 1.0, 0.0],
                      "position_spread": 0.1, "momentum_spread": 0.5}
    chain_start = {"sampler": "around", "q": zigzag(8, chain), "p": [0.0] * 24,
                   "position_spread": 0.02, "momentum_spread": 1.0}
    return [("spherical_pendulum", declared_pendulum(), builtin_pendulum(), pendulum_start, 100000 // k, 0.01, 1000),
            ("chain8", declared_chain(8, chain), {"name": "chain", "parameters": dict(chain, beads=8)}, chain_start,
             10000 // k, 0.002, 1000 // k)]


def run(binary, system, start, size, dt, steps, threads, cache, tolerance=TOL, backend="cpu"):
    """`tether run` with this system: (summary, final q and p, wall seconds of the command)."""
    config = {"system": system, "backend": backend,
              "method": {"name": "rattle", "dt": dt, "steps": steps,
                         "newton": {"tolerance": tolerance, "max_iterations": MAX_IT}},
              "ensemble": {"size": size, "seed": 5, "initial": start},
              "output": {"every": max(steps, 1), "final_states": True}}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        out = os.path.join(tmp, "out")
        began = time.perf_counter()
        subprocess.run([binary, "run", path, "--out", out, "--threads", str(threads), "--quiet"], check=True,
                       env=dict(os.environ, TETHER_CACHE_DIR=cache), stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - began
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        table = read_final_states(os.path.join(out, "final.csv"))
    dof = sum(1 for name in table if name.startswith("q"))
    state = np.stack([table[f"{v}{c}"] for v in "qp" for c in range(dof)], axis=1).astype(np.float64)
    return summary, state, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--backend", default="cpu", help="cpu, or cuda on a GPU machine (the pairs compiled by nvcc)")
    ap.add_argument("--scale", type=int, default=1, help="ensembles this many times larger (10 on a GPU)")
    ap.add_argument("--no-sizes", action="store_true", help="leave out bead_chain at 5, 12, 32 and 64 beads")
    args = ap.parse_args()
    backend = args.backend
    results = []
    with tempfile.TemporaryDirectory() as cache:
        for name, declared, builtin, start, size, dt, steps in cases(args.quick):
            size *= args.scale
            # First use: a tiny run compiles the pair; the same run again loads it.
            first = run(args.tether, declared, start, 8, dt, 1, 1, cache, backend=backend)[2]
            cached = min(run(args.tether, declared, start, 8, dt, 1, 1, cache, backend=backend)[2] for _ in range(3))
            builtin_tiny = min(run(args.tether, builtin, start, 8, dt, 1, 1, cache, backend=backend)[2]
                               for _ in range(3))
            rates = {"declared": [], "builtin": []}
            for _ in range(args.repeats):
                for kind, system in (("declared", declared), ("builtin", builtin)):
                    summary, state, _ = run(args.tether, system, start, size, dt, steps, args.threads, cache,
                                            backend=backend)
                    rates[kind].append(summary["trajectory_steps_per_second"])
                    if kind == "declared":
                        mine = state
                    else:
                        theirs = state
            # Agreement where Newton stops at its floor, after a fifth of the steps and after all of them:
            # what is left is the two formulations' roundoff, grown by the dynamics (a chain's is chaotic).
            floor = {}
            for at in (max(steps // 5, 1), steps):
                ends = [run(args.tether, system, start, size // 10, dt, at, args.threads, cache, FLOOR_TOL,
                            backend)[1] for system in (declared, builtin)]
                floor[at] = float(np.max(np.abs(ends[0] - ends[1])))
            best = {k: max(v) for k, v in rates.items()}
            row = {"case": name, "trajectories": size, "steps": steps, "dt": dt,
                   "declared_steps_per_second": best["declared"], "builtin_steps_per_second": best["builtin"],
                   "builtin_over_declared": best["builtin"] / best["declared"],
                   "max_final_state_difference": float(np.max(np.abs(mine - theirs))),
                   "max_final_state_difference_at_newton_floor": {str(k): v for k, v in floor.items()},
                   "newton_floor_trajectories": size // 10, "newton_floor_tolerance": FLOOR_TOL,
                   "first_use_compile_seconds": first - cached, "cached_start_adds_seconds": cached - builtin_tiny}
            results.append(row)
            print(f"{name}: declared {best['declared']:.3g} vs built-in {best['builtin']:.3g} trajectory-steps/s "
                  f"(built-in / declared {row['builtin_over_declared']:.2f}); final states differ by "
                  f"{row['max_final_state_difference']:.2g} (Newton at its floor: "
                  + ", ".join(f"{v:.2g} after {k} steps" for k, v in floor.items())
                  + f"); first use compiles in {row['first_use_compile_seconds']:.1f} s, "
                  f"a cached start adds {row['cached_start_adds_seconds'] * 1000:.0f} ms")
        # configs/bead_chain.json at other sizes: what a size costs at first use and at a cached start.
        with open(os.path.join(ROOT, "configs", "chain16.json")) as f:
            chain = json.load(f)["system"]["parameters"]
        sizes = []
        for beads in (() if args.no_sizes else (5, 12) if args.quick else (5, 12, 32, 64)):
            system = declared_chain(beads, chain)
            start = {"sampler": "around", "q": zigzag(beads, chain), "p": [0.0] * (3 * beads),
                     "position_spread": 0.02, "momentum_spread": 1.0}
            began = time.perf_counter()
            ok = run(args.tether, system, start, 8, 0.002, 1, 1, cache, backend=backend)[0]["failed_trajectories"] == 0
            first = time.perf_counter() - began
            cached = min(run(args.tether, system, start, 8, 0.002, 1, 1, cache, backend=backend)[2] for _ in range(3))
            summary, _, _ = run(args.tether, system, start, 1000, 0.002, 200, args.threads, cache, backend=backend)
            sizes.append({"beads": beads, "first_use_seconds": first, "cached_start_seconds": cached, "ok": ok,
                          "trajectory_steps_per_second": summary["trajectory_steps_per_second"],
                          "max_constraint_violation": summary["max_constraint_violation"]})
            print(f"bead_chain N = {beads}: a tiny run takes {first:.1f} s at first use, {cached:.2f} s cached; "
                  f"{summary['trajectory_steps_per_second']:.3g} trajectory-steps/s, max |g| "
                  f"{summary['max_constraint_violation']:.2g}")
    if not args.quick:
        save_result(json.dumps({**provenance(), "build": build_of(args.tether), "threads": args.threads,
                                "backend": backend, "scale": args.scale,
                                "results": results, "bead_chain_sizes": sizes}, indent=1),
                    "declared" + ("" if backend == "cpu" else f"-{backend}"))


if __name__ == "__main__":
    main()
