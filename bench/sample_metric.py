#!/usr/bin/env python3
"""What an adapted metric buys on a target whose scales differ by 100x.

    bench/sample_metric.py --tether build/tether           # saves bench/results/<date>-<host>-sample-metric.json
    bench/sample_metric.py --tether build/tether --quick   # a smaller run, not saved

Target: configs/bingham_metric.json, the Bingham density exp(-b z^2) on the
unit sphere (tether's `fisher_bingham`, kappa = 0, A = diag(0, 0, -b), b = 10^4), M = I. On S^2 the
height z is uniform under the surface measure (Archimedes), so z has the
density exp(-b z^2) on [-1, 1]: to 1e-4300 the normal N(0, 1/(2b)), sd
0.00707; the azimuth is uniform, and x, y have sd sqrt((1 - 1/(2b))/2) = 0.707.
The chains must cross the equator's circle (length 2 pi) with steps that the
stiff z direction keeps below ~0.01 under the mass metric.

One run, the same chains, warm-up and seed for each variant:
- `static` with the system's mass at L = 10 (h adapted by dual averaging);
- `dynamic` with the system's mass;
- `dynamic` with `diag` and with `dense` (Stan's windows);
- `static` with `diag` at L = 10.
Reported: the bulk ESS of the slowest coordinate (summary.json's min_ess_bulk
over x, y, z and V), steps per draw, ESS per step and per second, and ratios to
`static` with the mass. Each step of either algorithm evaluates the gradient
about twice (its end kick's, the next step's first kick reusing it, and its
reversibility check's; one more where a trajectory or subtree starts), so
ESS per step is ESS per gradient evaluation, up to that common factor. Exactness: one-sample
Kolmogorov-Smirnov tests of each variant's last draw per chain (independent
draws) against the exact marginals of z and the azimuth.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_shoot_bench import ROOT, build_of, provenance, save_result, tether_output  # noqa: E402

B = 1e4


def config(algorithm, metric, chains, draws, warmup):
    """configs/bingham_metric.json with this algorithm, metric and size, on the cpu."""
    with open(os.path.join(ROOT, "configs", "bingham_metric.json")) as f:
        c = json.load(f)
    assert c["system"]["parameters"]["bingham"][2] == -B, "the bench's exact marginals assume b = 10^4"
    c["sample"].update({"algorithm": algorithm, "metric": metric, "chains": chains, "draws": draws, "warmup": warmup})
    c["backend"] = "cpu"
    if algorithm == "static":
        c["method"]["steps"] = 10
    return c


def last_draws(out):
    import xarray as xr
    q = xr.open_dataset(os.path.join(out, "draws.nc"), group="posterior")["q"].values  # chain, draw, q_dim
    return q[:, -1, :]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--quick", action="store_true", help="fewer chains and draws; nothing saved")
    a = ap.parse_args()
    chains, draws, warmup = (100, 300, 300) if a.quick else (1000, 1000, 1000)
    variants = [("static", "mass"), ("dynamic", "mass"), ("dynamic", "diag"), ("dynamic", "dense"), ("static", "diag")]
    rows = []
    for algorithm, metric in variants:
        with tether_output(a.tether, "sample", config(algorithm, metric, chains, draws, warmup), a.threads) as (out, s):
            q = last_draws(out)
            d = s["diagnostics"]
            steps = s["mean_steps"] * s["chains"] * s["draws"]
            z = q[:, 2]
            azimuth = np.arctan2(q[:, 1], q[:, 0])
            row = {"algorithm": algorithm, "metric": metric,
                   "step_size_after_warmup": s["step_size_after_warmup"], "mean_steps": s["mean_steps"],
                   "min_ess_bulk": d["min_ess_bulk"], "ess_bulk": [x["ess_bulk"] for x in d["q"]],
                   "sd": [x["sd"] for x in d["q"]], "sampling_seconds": s["sampling_seconds"],
                   "ess_per_step": d["min_ess_bulk"] / steps,
                   "ess_per_second": d["min_ess_bulk"] / s["sampling_seconds"],
                   "ks_p_z": stats.kstest(z, stats.norm(scale=math.sqrt(1 / (2 * B))).cdf).pvalue,
                   "ks_p_azimuth": stats.kstest(azimuth, stats.uniform(loc=-math.pi, scale=2 * math.pi).cdf).pvalue,
                   "metric_fallbacks": s.get("metric_fallbacks")}
            rows.append(row)
            print(f"{algorithm:8s} {metric:6s} h {row['step_size_after_warmup']['min']:.3g}-"
                  f"{row['step_size_after_warmup']['max']:.3g}  steps/draw {row['mean_steps']:8.2f}  "
                  f"min ESS {row['min_ess_bulk']:10.1f}  ESS/step {row['ess_per_step']:.3e}  "
                  f"ESS/s {row['ess_per_second']:10.1f}  KS p z {row['ks_p_z']:.3f} azimuth {row['ks_p_azimuth']:.3f}",
                  flush=True)
    base = rows[0]
    for r in rows:
        r["ess_per_step_ratio"] = r["ess_per_step"] / base["ess_per_step"]
        r["ess_per_second_ratio"] = r["ess_per_second"] / base["ess_per_second"]
    for r in rows:
        print(f"{r['algorithm']:8s} {r['metric']:6s} ESS per step {r['ess_per_step_ratio']:8.1f}x, "
              f"per second {r['ess_per_second_ratio']:8.1f}x static/mass")
    result = {"provenance": provenance(), "build": build_of(a.tether), "threads": a.threads,
              "target": f"Bingham exp(-{B:g} z^2) on S^2, sd of z {math.sqrt(1 / (2 * B)):.5f}, of x and y "
                        f"{math.sqrt((1 - 1 / (2 * B)) / 2):.4f}",
              "chains": chains, "draws": draws, "warmup": warmup, "static_steps": 10, "variants": rows}
    if not a.quick:
        print("saved", save_result(json.dumps(result, indent=1), "sample-metric"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
