#!/usr/bin/env python3
"""`tether sample` beside Mici on the same target, and tether's backends side by side.

    bench/sample_peers.py --tether build-cpu/tether          # saves bench/results/<date>-<host>-sample-peers.json
    bench/sample_peers.py --tether build-cpu/tether --quick  # a smaller run, not saved
    bench/sample_peers.py --algorithm dynamic                # ...-sample-peers-dynamic.json

Target: the planar double pendulum in Cartesian coordinates (tether's
`double_pendulum`; masses and lengths 1, gravity 1, kT = 1), exp(-V(q))
on N = {|x1| = 1, |x2 - x1| = 1} with V = g (y1 + y2). With M = I the measure
M induces on N is the Hausdorff measure, which Mici's `dens_wrt_hausdorff`
samples against, so both sample the same distribution.

Same algorithm, same accuracy, with RATTLE (Mici's ConstrainedLeapfrogIntegrator
is RATTLE, Reich 1996) and Newton to 1e-12 in both:
- `--algorithm static`: static-length HMC (L = 20 steps of h = 0.1, no jitter,
  no adaptation), a full momentum refresh, Metropolis on H, and a reverse
  check (tether: the whole trajectory, 1e-8; Mici: every step, its default 2e-8);
- `--algorithm dynamic`: what Mici's users run, its `sample_constrained_hmc_chains`
  with its defaults (DynamicMultinomialHMC: multinomial dynamic integration
  time, the generalised U-turn criterion with extra subtree checks, max tree
  depth 10, a reverse check at every step, step size adapted by dual averaging
  over the warm-up towards an acceptance statistic of 0.8), against tether's
  `sample.algorithm` "dynamic" with the same settings (every step checked, 1e-8;
  warm-up and target alike); both start at h = 0.1 and time their warm-up too.
Every chain starts from the same state; the first `--burn` draws are dropped
before any statistic.

Measured in one run: Mici (its own best practice for many chains: n_process
worker processes, one chain each), tether cpu and tether reference, each
sampling seconds, and the bulk ESS of y1, y2 and the relative angle (ArviZ on
both draw sets, the same estimator) per second. Equal distribution: two-sample
Kolmogorov-Smirnov tests between tether's and Mici's draws of V and of the
relative angle, on draws thinned to about one per effective sample.
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_shoot_bench import ROOT, provenance, save_result, tether_output  # noqa: E402

G, H, STEPS, TOL = 1.0, 0.1, 20, 1e-12
START = np.array([1.0, 0.0, 1.0, -1.0])  # t1 = pi/2, t2 = 0


def relative_angle(q):
    t1 = np.arctan2(q[..., 0], -q[..., 1])
    t2 = np.arctan2(q[..., 2] - q[..., 0], -(q[..., 3] - q[..., 1]))
    return np.angle(np.exp(1j * (t1 - t2)))


def potential(q):
    return G * (q[..., 1] + q[..., 3])


def run_tether(binary, backend, chains, draws, threads, algorithm, warmup):
    config = {
        "system": {"name": "double_pendulum",
                   "parameters": {"mass1": 1.0, "mass2": 1.0, "length1": 1.0, "length2": 1.0, "gravity": G}},
        "method": {"name": "rattle", "dt": H, "steps": STEPS, "newton": {"tolerance": TOL}},
        "sample": {"algorithm": algorithm, "chains": chains, "draws": draws, "warmup": warmup, "seed": 17,
                   "temperature": 1.0, "initial": {"states": [{"q": START.tolist(), "p": [0, 0, 0, 0]}] * chains}},
        "backend": backend,
    }
    if algorithm == "dynamic":
        del config["method"]["steps"]
    import arviz as az
    with tether_output(binary, "sample", config, threads) as (out, summary):
        idata = az.from_netcdf(os.path.join(out, "draws.nc"))
        q = idata.posterior["q"].values.copy()  # (chain, draw, 4)
        accept = float(idata.sample_stats["acceptance_rate"].values.mean())
    return q, summary["sampling_seconds"], accept, summary


# Mici's model, as module-level functions (its worker processes pickle them).
def mici_neg_log_dens(q):
    return G * (q[1] + q[3])


def mici_grad_neg_log_dens(q):
    return np.array([0.0, G, 0.0, G])


def mici_constr(q):
    return np.array([q[0] ** 2 + q[1] ** 2 - 1.0, (q[2] - q[0]) ** 2 + (q[3] - q[1]) ** 2 - 1.0])


def mici_jacob_constr(q):
    return np.array([[2 * q[0], 2 * q[1], 0.0, 0.0],
                     [-2 * (q[2] - q[0]), -2 * (q[3] - q[1]), 2 * (q[2] - q[0]), 2 * (q[3] - q[1])]])


def mici_trace(state):
    return {"q": state.pos}


def run_mici(chains, draws, processes, algorithm, warmup):
    import mici
    if algorithm == "dynamic":  # what sample_constrained_hmc_chains gives, all defaults but the solver's tolerances
        start = time.perf_counter()
        _, traces, stats = mici.interface.sample_constrained_hmc_chains(
            warmup, draws, [START.copy() for _ in range(chains)], mici_neg_log_dens, mici_constr,
            grad_neg_log_dens=mici_grad_neg_log_dens, jacob_constr=mici_jacob_constr, seed=17,
            integrator_kwargs={"step_size": H, "projection_solver_kwargs": {"constraint_tol": TOL, "position_tol": TOL}},
            trace_funcs=[mici_trace], n_process=processes, display_progress=False)
        seconds = time.perf_counter() - start
        return np.asarray(traces["q"]), seconds, float(np.mean(stats["accept_stat"]))
    system = mici.systems.DenseConstrainedEuclideanMetricSystem(
        neg_log_dens=mici_neg_log_dens, grad_neg_log_dens=mici_grad_neg_log_dens, constr=mici_constr,
        jacob_constr=mici_jacob_constr, dens_wrt_hausdorff=True)
    integrator = mici.integrators.ConstrainedLeapfrogIntegrator(
        system, step_size=H, projection_solver_kwargs={"constraint_tol": TOL, "position_tol": TOL})
    sampler = mici.samplers.StaticMetropolisHMC(system, integrator, np.random.default_rng(17), n_step=STEPS)
    init = [mici.states.ChainState(pos=START.copy(), mom=None, dir=1) for _ in range(chains)]
    start = time.perf_counter()
    _, traces, stats = sampler.sample_chains(0, draws, init, trace_funcs=[mici_trace],
                                             n_process=processes, display_progress=False)
    seconds = time.perf_counter() - start
    q = np.asarray(traces["q"])  # (chain, draw, 4)
    accept = float(np.mean(stats["accept_stat"]))
    return q, seconds, accept


def exact_mean_potential(grid=1000):
    """E[V] by quadrature in the angles: V = -g (2 cos t1 + cos t2), and the
    surface measure M = I induces is sqrt(m2 l1^2 l2^2 (m1 + m2 sin^2(t1 - t2))) dt1 dt2
    (tests/sampling/test_hmc.cpp derives it)."""
    t = (np.arange(grid) + 0.5) * 2 * np.pi / grid
    t1, t2 = np.meshgrid(t, t, indexing="ij")
    v = -G * (2 * np.cos(t1) + np.cos(t2))
    w = np.exp(-v) * np.sqrt(1 + np.sin(t1 - t2) ** 2)
    return float((v * w).sum() / w.sum())


def ess_per_second(q, burn, seconds):
    import arviz as az
    q = q[:, burn:]
    ess = {name: float(az.ess(x, method="bulk"))
           for name, x in (("y1", q[..., 1]), ("y2", q[..., 3]), ("relative_angle", relative_angle(q)))}
    return ess, min(ess.values()) / seconds


def thinned(x, ess):
    """About one draw per effective sample, from every chain."""
    step = max(1, int(math.ceil(x.size / ess)))
    return x[:, ::step].ravel()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--quick", action="store_true", help="a small run, not saved")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--algorithm", choices=["static", "dynamic"], default="static")
    args = ap.parse_args()
    from scipy import stats
    # Mici runs ~7 iterations per second per process on the 2-core VM: its chains are kept few.
    chains_t, chains_m, chains_ref = (200, 2, 2) if args.quick else (2000, 2, 4)
    draws, burn = (300, 50) if args.quick else (1000, 100)
    warmup = 0 if args.algorithm == "static" else (100 if args.quick else 200)
    dynamic = args.algorithm == "dynamic"

    result = {"provenance": provenance(), "target": "double_pendulum, masses and lengths 1, gravity 1, kT 1",
              "algorithm": {"name": args.algorithm, "h": H, "newton_tolerance": TOL, "warmup": warmup,
                            "draws": draws, "burn": burn, **({"max_depth": 10, "target_acceptance": 0.8} if dynamic
                                                             else {"L": STEPS})}, "runs": {}}
    q_mici, s_mici, a_mici = run_mici(chains_m, draws, min(chains_m, args.threads), args.algorithm, warmup)
    q_cpu, s_cpu, a_cpu, _ = run_tether(args.tether, "cpu", chains_t, draws, args.threads, args.algorithm, warmup)
    q_ref, s_ref, a_ref, _ = run_tether(args.tether, "reference", chains_ref, draws, 1, args.algorithm, warmup)
    for name, q, seconds, accept, chains in (("mici", q_mici, s_mici, a_mici, chains_m),
                                             ("tether_cpu", q_cpu, s_cpu, a_cpu, chains_t),
                                             ("tether_reference", q_ref, s_ref, a_ref, chains_ref)):
        ess, rate = ess_per_second(q, burn, seconds)
        result["runs"][name] = {"chains": chains, "seconds": seconds, "acceptance": accept,
                                "chain_iterations_per_second": chains * (warmup + draws) / seconds,
                                "ess_bulk": ess, "min_ess_bulk_per_second": rate}
    runs = result["runs"]
    result["ratios"] = {
        "tether_cpu_over_mici_ess_per_second": runs["tether_cpu"]["min_ess_bulk_per_second"] /
        runs["mici"]["min_ess_bulk_per_second"],
        "tether_cpu_over_reference_iterations_per_second": runs["tether_cpu"]["chain_iterations_per_second"] /
        runs["tether_reference"]["chain_iterations_per_second"]}
    # Same distribution: two-sample KS on roughly independent draws.
    tests = {}
    for label, f in (("potential", potential), ("relative_angle", relative_angle)):
        a, b = f(q_cpu[:, burn:]), f(q_mici[:, burn:])
        ta = thinned(a, min(runs["tether_cpu"]["ess_bulk"].values()))
        tb = thinned(b, min(runs["mici"]["ess_bulk"].values()))
        ks = stats.ks_2samp(ta, tb)
        tests[label] = {"tether_draws": int(ta.size), "mici_draws": int(tb.size), "ks_statistic": float(ks.statistic),
                        "p_value": float(ks.pvalue), "tether_mean": float(a.mean()), "mici_mean": float(b.mean())}
    result["two_sample"] = tests
    result["exact_mean_potential"] = exact_mean_potential()
    text = json.dumps(result, indent=2)
    print(text)
    if not args.quick and not args.no_save:
        name = "sample-peers" + ("-dynamic" if dynamic else "")
        print("saved bench/results/" + save_result(text, name), file=sys.stderr)


if __name__ == "__main__":
    main()
