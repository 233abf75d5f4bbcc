#!/usr/bin/env python3
"""Single against multiple shooting as the horizon grows (issue 18, item 5).

    bench/shoot_horizon.py --tether build/tether                 # T = 4, 8, 16; nodes 1 and 16; saves bench/results/
    bench/shoot_horizon.py --times 8 --nodes 1,4,16 --no-save
    bench/shoot_horizon.py --potential hill --times 4,8,12,16

The car of MMVW13 §5 in the bowl potential V = -cos r, or in the hill V = cos r (with a
potential the horizon matters: without one a sub-Riemannian problem at horizon T is
the one at T = 1 with the covector scaled), q0 = 0, 30 targets uniform in [-1, 1]^2 x [-0.5, 0.5]^2
(seed 3), GL2 at 40 steps per unit time, the guesses (q1 - q0) / T and 8 (--guesses) normal
ones of scale 1 (seed 4), Newton tolerance 1e-10, 60 iterations, no continuation. For every
horizon and node count: targets converged, by status, shooting seconds, and for the
targets that two node counts both solved, whether they found the same geodesic
(relative length difference, and the largest difference of the initial covectors).
"""
import argparse
import json
import os
import sys

from run_shoot_bench import provenance, save_result, tether_shoot

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(binary, potential, time, nodes, guesses, threads):
    steps = 40 * int(round(time))
    steps = -(-steps // nodes) * nodes
    config = {
        "system": {"name": "parallel_parking", "parameters": {"potential": potential}},
        "method": {"name": "gauss_legendre", "stages": 2, "steps": steps},
        "shoot": {"q0": [0, 0, 0, 0], "time": time, "nodes": nodes,
                  "targets": {"random": {"min": [-1, -1, -0.5, -0.5], "max": [1, 1, 0.5, 0.5], "count": 30, "seed": 3}},
                  "guesses": {"toward": True, "random": {"count": guesses, "scale": 1.0, "seed": 4}},
                  "newton": {"tolerance": 1e-10, "max_iterations": 60}},
        "backend": "cpu",
    }
    s, rows = tether_shoot(binary, config, threads)
    lengths = [float(r["length"]) if r["converged"] == "1" else None for r in rows]
    p0 = [[float(r[f"p0_{c}"]) for c in range(4)] if r["converged"] == "1" else None for r in rows]
    return {"steps": steps, "converged": s["converged"], "targets": s["targets"], "by_status": s["by_status"],
            "shooting_seconds": s["shooting_seconds"], "lengths": lengths, "p0": p0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--potential", default="bowl", choices=["bowl", "hill"], help="the car's potential (default bowl)")
    ap.add_argument("--times", default="4,8,16", help="horizons T (default 4,8,16)")
    ap.add_argument("--nodes", default="1,16", help="node counts (default 1,16)")
    ap.add_argument("--guesses", type=int, default=8, help="random guesses per target besides `toward` (default 8)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    if not os.access(args.tether, os.X_OK):
        sys.exit(f"error: {args.tether} is not an executable tether binary (build first, or pass --tether)")
    runs = {}
    for time in [float(t) for t in args.times.split(",") if t]:
        for nodes in [int(k) for k in args.nodes.split(",") if k]:
            r = run(args.tether, args.potential, time, nodes, args.guesses, args.threads)
            runs[f"T{time:g}_nodes{nodes}"] = r
            print(f"[shoot_horizon] T = {time:g}, {nodes} nodes: {r['converged']}/{r['targets']} converged, "
                  f"{r['shooting_seconds']:.1f} s", file=sys.stderr)
    # Same geodesic where two node counts both converged: relative length difference.
    pairs = {}
    keys = list(runs)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if a.split("_")[0] != b.split("_")[0]:
                continue
            la, lb = runs[a]["lengths"], runs[b]["lengths"]
            both = [i for i in range(len(la)) if la[i] is not None and lb[i] is not None]
            same = sum(abs(la[i] - lb[i]) <= 1e-6 * la[i] for i in both)
            p0_gap = max((max(abs(x - y) for x, y in zip(runs[a]["p0"][i], runs[b]["p0"][i])) for i in both),
                         default=None)
            pairs[f"{a}_vs_{b}"] = {"both_converged": len(both), "same_length": same,
                                   "shorter_in_second": sum(lb[i] < la[i] * (1 - 1e-6) for i in both),
                                   "largest_p0_difference": p0_gap,
                                   "first_failed": sum(x is None for x in la),
                                   "first_failed_second_solved": sum(x is None and y is not None for x, y in zip(la, lb)),
                                   "second_failed_first_solved": sum(y is None and x is not None for x, y in zip(la, lb))}
    doc = {"benchmark": f"single against multiple shooting, parking car in the {args.potential}, growing horizon",
           **provenance(),
           "runs": runs, "pairs": pairs}
    text = json.dumps(doc, indent=1)
    print(text)
    if not args.no_save:
        name = save_result(text, "shoot-horizon")
        print(f"[shoot_horizon] saved bench/results/{name}", file=sys.stderr)


if __name__ == "__main__":
    main()
