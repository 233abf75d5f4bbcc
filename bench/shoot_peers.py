#!/usr/bin/env python3
"""tether shoot against the shooters a user would otherwise write, side by side in one run.

    bench/shoot_peers.py                          # tether, SciPy and JAX, best of 3 interleaved; saves bench/results/
    bench/shoot_peers.py --peers tether,scipy --repeats 1 --quick --no-save

The problem (issue 18, shared/measurements/shooting.md): the Heisenberg boundary-value
problems of configs/heisenberg_sphere.json, its 25 x 17 grid of targets on
[-1.2, 1.2] x {0} x [-0.4, 0.4] minus the x = 0 column (the cut locus, where a circle
of covectors gives the same length), q0 = 0, T = 1. Every tool shoots each target from
the same 9 guesses: (q1 - q0) / T and 8 normal ones of scale 2, drawn exactly as
tether draws them (Philox4x32-10, seed 1, stream t * 8 + j; `tether::CounterRng`),
keeps the shortest converged geodesic, and tries targets that none of the 9 reached
again by continuation from the nearest solved target (2 rounds, 4 substeps), as the
config asks tether to. A peer's shot counts as converged when |q(T) - q1| <= 1e-10;
tether stops its Newton at --tether-tolerance (1e-12), since a residual of 1e-10 alone
leaves up to 1.5e-10 relative length error where the length is ill-conditioned in the
target (phi near 2 pi), and the peers' solvers overshoot 1e-10 by far on their own.
What is compared is the accuracy reached, judged the same way for every tool.

Accuracy is judged against the closed-form Heisenberg distance: with r^2 = x^2 + y^2,
the geodesic with phi = p_z T reaches z / r^2 = (phi - sin phi) / (8 sin^2(phi / 2)),
and its length is r (phi / 2) / sin(phi / 2).

- tether: `tether shoot` (cpu backend, --threads = --processes) on a config listing the
  targets, with a fixed step count (--steps) or shoot.accuracy (--accuracy: tether
  chooses the steps, its first pass at 16 steps); rate from its summary
  (shooting_seconds, every pass), length error from shots.csv.
- scipy: `scipy.optimize.root` (hybr) on q(T; p0) - q1 with the exact Jacobian from the
  variational equations, the flow and its tangent by `solve_ivp` DOP853 (rtol 1e-10,
  atol 1e-12), a `multiprocessing.Pool` over targets.
- jax: the flow and its tangent by diffrax Dopri8 with fixed steps (--jax-steps) under
  `jax.jacfwd`, Newton (no line search, --jax-iterations fixed iterations, since a
  vmapped loop runs as long as its slowest shot), `jit(vmap)` over all shots at once,
  split over one host device per core, 64-bit. Timed twice: the first call (compile
  included) and a second one, whose time counts.

Rates are targets per second of the timed part (for the peers: the whole solve,
targets and guesses prepared beforehand); best of --repeats interleaved runs.
"""
import argparse
import json
import math
import multiprocessing
import os
import sys
import time

import numpy as np

from run_shoot_bench import build_of, provenance, save_result, tether_shoot  # recorded and run the same way

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

T_END = 1.0
TOLERANCE = 1e-10
RANDOM_GUESSES, GUESS_SCALE, GUESS_SEED = 8, 2.0, 1
ROUNDS, SUBSTEPS = 2, 4


# ---------------------------------------------------------------------------
# The problem: targets, guesses (tether's CounterRng), closed-form distance.

def targets(quick):
    xs = np.linspace(-1.2, 1.2, 25)
    zs = np.linspace(-0.4, 0.4, 17)
    if quick:
        xs, zs = xs[::4], zs[::4]
    return np.array([[x, 0.0, z] for x in xs for z in zs if abs(x) > 1e-12])


M32 = 0xFFFFFFFF


def philox_normals(seed, stream, count):
    """tether::CounterRng(seed, stream).normal() drawn `count` times."""
    key0, key1 = seed & M32, (seed >> 32) & M32
    words, counter = [], 0

    def refill():
        nonlocal counter
        c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, stream & M32, (stream >> 32) & M32
        k0, k1 = key0, key1
        for _ in range(10):
            p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
            c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        counter += 1
        return [c0, c1, c2, c3]

    def uniform():
        nonlocal words
        if not words:
            words = refill()
        hi = words.pop(0)
        if not words:
            words = refill()
        lo = words.pop(0)
        bits = ((hi << 20) ^ (lo >> 12)) & ((1 << 52) - 1)
        return (bits + 0.5) * (1.0 / 4503599627370496.0)

    out = []
    while len(out) < count:
        u1, u2 = uniform(), uniform()
        r, t = math.sqrt(-2 * math.log(u1)), 2 * math.pi * u2
        out += [r * math.cos(t), r * math.sin(t)]
    return out[:count]


def guesses(target_index, target):
    g = [np.asarray(target) / T_END]
    for j in range(RANDOM_GUESSES):
        g.append(GUESS_SCALE * np.array(philox_normals(GUESS_SEED, target_index * RANDOM_GUESSES + j, 3)))
    return g


def heisenberg_distance(q):
    from scipy.optimize import brentq
    r2 = q[0] ** 2 + q[1] ** 2
    ratio = q[2] / r2

    def f(phi):
        return (phi - math.sin(phi)) / (8 * math.sin(phi / 2) ** 2) - ratio if phi != 0 else -ratio

    if ratio == 0:
        return math.sqrt(r2)
    a, b = (1e-12, 2 * math.pi - 1e-9) if ratio > 0 else (-2 * math.pi + 1e-9, -1e-12)
    phi = brentq(f, a, b, xtol=1e-15, rtol=1e-15, maxiter=200)
    return math.sqrt(r2) * (phi / 2) / math.sin(phi / 2)


def length_errors(tq, lengths):
    """max relative error of the kept lengths against the closed form, how many targets were
    solved, and how many of those kept a geodesic that is not the shortest (error > 1e-6)."""
    worst, solved, off = 0.0, 0, 0
    for q, L in zip(tq, lengths):
        if L is None or not math.isfinite(L):
            continue
        solved += 1
        exact = heisenberg_distance(q)
        worst = max(worst, abs(L - exact) / exact)
        off += abs(L - exact) > 1e-6 * exact
    return worst, solved, off


# ---------------------------------------------------------------------------
# tether

def run_tether(binary, tq, threads, stages, steps, tolerance, accuracy=None):
    """steps: a fixed step count; or accuracy: shoot.accuracy, tether choosing the steps."""
    method = {"name": "gauss_legendre", "stages": stages}
    if accuracy is None:
        method["steps"] = steps
    config = {
        "system": {"name": "heisenberg"},
        "method": method,
        "shoot": {
            "q0": [0, 0, 0], "time": T_END,
            "targets": {"list": [list(map(float, q)) for q in tq]},
            "guesses": {"toward": True, "random": {"count": RANDOM_GUESSES, "scale": GUESS_SCALE, "seed": GUESS_SEED}},
            "newton": {"tolerance": tolerance, "max_iterations": 40},
            "continuation": {"rounds": ROUNDS, "substeps": SUBSTEPS},
        },
        "backend": "cpu",
    }
    if accuracy is not None:
        config["shoot"]["accuracy"] = accuracy
    summary, rows = tether_shoot(binary, config, threads)
    lengths = [float(r["length"]) if r["converged"] == "1" else None for r in rows]
    err, solved, off = length_errors(tq, lengths)
    result = {"seconds": summary["shooting_seconds"], "shots": summary["shots"],
              "iterations": summary["shooting_iterations"], "solved": solved, "not_shortest": off,
              "max_rel_length_error": err}
    if accuracy is not None:
        result["accuracy"] = summary["accuracy"]  # the steps chosen, passes, largest estimate
    return result


# ---------------------------------------------------------------------------
# SciPy: hybr with the exact Jacobian from the variational equations.

def heisenberg_rhs(_, y):
    """The flow and its variational equations (6 + 6 x 3), in plain floats."""
    x, yy, _z, px, py, pz = y[:6]
    u, v = px - yy * pz / 2, py + x * pz / 2
    out = np.empty(24)
    out[:6] = (u, v, -yy * u / 2 + x * v / 2, -v * pz / 2, u * pz / 2, 0.0)
    for c in range(3):  # column c of the tangent: (dx, dy, dz, dpx, dpy, dpz)
        dx, dy, _dz, dpx, dpy, dpz = y[6 + c:24:3]
        du = dpx - dy * pz / 2 - yy * dpz / 2
        dv = dpy + dx * pz / 2 + x * dpz / 2
        out[6 + c:24:3] = (du, dv, (-dy * u - yy * du + dx * v + x * dv) / 2,
                           -(dv * pz + v * dpz) / 2, (du * pz + u * dpz) / 2, 0.0)
    return out


def scipy_endpoint(p0):
    from scipy.integrate import solve_ivp
    y0 = np.concatenate([np.zeros(3), p0, np.vstack([np.zeros((3, 3)), np.eye(3)]).ravel()])
    sol = solve_ivp(heisenberg_rhs, (0, T_END), y0, method="DOP853", rtol=1e-10, atol=1e-12)
    return sol.y[:3, -1], sol.y[6:, -1].reshape(6, 3)[:3]


def scipy_shot(p0, target):
    from scipy.optimize import root

    def fun(p):
        q, j = scipy_endpoint(p)
        return q - target, j

    sol = root(fun, p0, jac=True, method="hybr", options={"xtol": 1e-13, "maxfev": 200})
    q, _ = scipy_endpoint(sol.x)
    ok = np.linalg.norm(q - target) <= TOLERANCE
    px, py, pz = sol.x
    return ok, sol.x, math.sqrt(px * px + py * py) * T_END  # H = (px^2 + py^2) / 2 at q0 = 0


def scipy_target(args):
    index, target = args
    best = None
    for g in guesses(index, target):
        ok, p, L = scipy_shot(g, target)
        if ok and (best is None or L < best[1]):
            best = (p, L)
    return best


def scipy_continue(args):
    start_target, start_p, target = args
    p = start_p
    for j in range(1, SUBSTEPS + 1):
        ok, p, L = scipy_shot(p, start_target + j / SUBSTEPS * (target - start_target))
        if not ok:
            return None
    return (p, L)


def run_scipy(tq, processes):
    t0 = time.perf_counter()
    with multiprocessing.Pool(processes) as pool:
        kept = pool.map(scipy_target, list(enumerate(tq)), chunksize=1)
        for _ in range(ROUNDS):
            todo = [i for i, k in enumerate(kept) if k is None]
            solved = [i for i, k in enumerate(kept) if k is not None]
            if not todo or not solved:
                break
            jobs = []
            for i in todo:
                near = min(solved, key=lambda s: np.linalg.norm(tq[s] - tq[i]))
                jobs.append((tq[near], kept[near][0], tq[i]))
            for i, r in zip(todo, pool.map(scipy_continue, jobs, chunksize=1)):
                kept[i] = r
    seconds = time.perf_counter() - t0
    err, solved, off = length_errors(tq, [k[1] if k else None for k in kept])
    return {"seconds": seconds, "solved": solved, "not_shortest": off, "max_rel_length_error": err}


# ---------------------------------------------------------------------------
# JAX: diffrax Dopri8 fixed steps, Newton with jax.jacfwd, jit(vmap) over every shot.

def run_jax(tq, steps, iterations, processes):
    os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={processes}")
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import diffrax

    def field(_, y, __):
        x, yy, _z, px, py, pz = y
        u, v = px - yy * pz / 2, py + x * pz / 2
        return jnp.array([u, v, -yy * u / 2 + x * v / 2, -v * pz / 2, u * pz / 2, 0.0])

    term = diffrax.ODETerm(field)
    solver = diffrax.Dopri8()

    def endpoint(p):
        y0 = jnp.concatenate([jnp.zeros(3), p])
        sol = diffrax.diffeqsolve(term, solver, 0.0, T_END, T_END / steps, y0, max_steps=steps,
                                  stepsize_controller=diffrax.ConstantStepSize(), adjoint=diffrax.ForwardMode())
        return sol.ys[-1, :3]

    def endpoint_twice(p):
        q = endpoint(p)
        return q, q

    def newton(p, target):
        def body(_, p):
            j, q = jax.jacfwd(endpoint_twice, has_aux=True)(p)  # one pass: q(T) and its Jacobian
            return p - jnp.linalg.solve(j, q - target)
        p = jax.lax.fori_loop(0, iterations, body, p)
        r = jnp.linalg.norm(endpoint(p) - target)
        return p, r

    solve = jax.jit(jax.vmap(newton))
    guess = np.array([g for i, q in enumerate(tq) for g in guesses(i, q)])
    tgt = np.repeat(tq, RANDOM_GUESSES + 1, axis=0)
    # The shots split over the host devices (one per core), padded to a multiple of their count.
    devices = jax.devices()[:processes]
    shots = len(guess)
    pad = -shots % len(devices)
    guess = np.concatenate([guess, np.repeat(guess[-1:], pad, axis=0)])
    tgt = np.concatenate([tgt, np.repeat(tgt[-1:], pad, axis=0)])
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("shots",)),
                                          jax.sharding.PartitionSpec("shots"))
    guess, tgt = jax.device_put(guess, sharding), jax.device_put(tgt, sharding)

    def once():
        t0 = time.perf_counter()
        p, r = solve(guess, tgt)
        p, r = np.asarray(p)[:shots], np.asarray(r)[:shots]
        return time.perf_counter() - t0, p, r

    first, _, _ = once()
    second, p, r = once()
    per = RANDOM_GUESSES + 1
    kept = []
    for i in range(len(tq)):
        best = None
        for j in range(per):
            k = i * per + j
            if np.isfinite(r[k]) and r[k] <= TOLERANCE:
                L = math.hypot(p[k, 0], p[k, 1]) * T_END
                best = L if best is None or L < best else best
        kept.append(best)
    err, solved, off = length_errors(tq, kept)
    # (no continuation: every target is solved from its guesses at these settings; `solved` says so)
    return {"seconds": second, "seconds_first_call": first, "solved": solved, "not_shortest": off,
            "max_rel_length_error": err,
            "devices": len(devices), "shots_not_converged": int(np.sum(~(r <= TOLERANCE)))}


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--peers", default="tether,scipy,jax", help="comma list of tether, scipy, jax")
    ap.add_argument("--processes", type=int, default=2, help="threads / processes / host devices (default 2)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs; the best counts (default 3)")
    ap.add_argument("--scipy-repeats", type=int, default=0,
                    help="runs of the (slow) SciPy peer, interleaved with the first ones (default --repeats)")
    ap.add_argument("--stages", type=int, default=3, help="tether's Gauss-Legendre stages (default 3)")
    ap.add_argument("--steps", default="80", help="tether's steps, a comma list runs each (default 80)")
    ap.add_argument("--accuracy", default="",
                    help="tether with shoot.accuracy instead of a step count, a comma list runs each (e.g. 1e-10)")
    ap.add_argument("--tether-tolerance", type=float, default=1e-12,
                    help="tether's shooting tolerance on |q(T) - q1| (default 1e-12: at 1e-10 the residual "
                         "alone leaves ~1.5e-10 relative length error where the length is ill-conditioned)")
    ap.add_argument("--jax-steps", type=int, default=19, help="Dopri8 fixed steps (default 19)")
    ap.add_argument("--jax-iterations", type=int, default=40, help="Newton iterations (default 40)")
    ap.add_argument("--quick", action="store_true", help="every 4th grid point (30 targets)")
    ap.add_argument("--no-save", action="store_true", help="print the JSON only")
    args = ap.parse_args()

    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in ("tether", "scipy", "jax"):
            sys.exit(f"error: --peers: unknown peer '{p}' (tether, scipy, jax)")
    if "tether" in peers and not os.access(args.tether, os.X_OK):
        sys.exit(f"error: {args.tether} is not an executable tether binary (build first, or pass --tether)")
    tq = targets(args.quick)
    steps = [int(s) for s in args.steps.split(",") if s]
    accuracies = [float(a) for a in args.accuracy.split(",") if a]
    labels = [f"tether_gl{args.stages}_{n}" for n in steps] if "tether" in peers else []
    labels += [f"tether_gl{args.stages}_accuracy_{a:g}" for a in accuracies] if "tether" in peers else []
    labels += [p for p in peers if p != "tether"]
    runs = {p: [] for p in labels}
    for rep in range(args.repeats):
        for p in labels:
            if p == "scipy" and rep >= (args.scipy_repeats or args.repeats):
                continue
            print(f"[shoot_peers] run {rep + 1}/{args.repeats}: {p}", file=sys.stderr)
            if p.startswith("tether") and "_accuracy_" in p:
                r = run_tether(args.tether, tq, args.processes, args.stages, None, args.tether_tolerance,
                               accuracy=float(p.rsplit("_", 1)[1]))
            elif p.startswith("tether"):
                r = run_tether(args.tether, tq, args.processes, args.stages, int(p.rsplit("_", 1)[1]),
                               args.tether_tolerance)
            elif p == "scipy":
                r = run_scipy(tq, args.processes)
            else:
                r = run_jax(tq, args.jax_steps, args.jax_iterations, args.processes)
            r["targets_per_second"] = len(tq) / r["seconds"]
            runs[p].append(r)
            print(f"[shoot_peers]   {len(tq) / r['seconds']:.2f} targets/s, {r['solved']}/{len(tq)} solved "
                  f"({r['not_shortest']} not the shortest), max rel. length error {r['max_rel_length_error']:.2e}",
                  file=sys.stderr)
    best = {p: max(rs, key=lambda r: r["targets_per_second"]) for p, rs in runs.items()}
    ratios = {}
    for t in (p for p in best if p.startswith("tether")):
        for p in (p for p in best if not p.startswith("tether")):
            ratios[f"{t}_over_{p}"] = best[t]["targets_per_second"] / best[p]["targets_per_second"]
    doc = {
        "benchmark": "heisenberg shooting, tether against peers",
        **provenance(),
        "settings": {"targets": len(tq), "guesses_per_target": RANDOM_GUESSES + 1, "tolerance": TOLERANCE,
                     "processes": args.processes, "tether": f"gauss_legendre stages {args.stages}, steps {args.steps}, accuracy {args.accuracy or '-'}, "
                                                f"tolerance {args.tether_tolerance}",
                     "tether_build": build_of(args.tether) if "tether" in peers else None,
                     "jax": f"Dopri8, {args.jax_steps} fixed steps, {args.jax_iterations} Newton iterations"},
        "best": best, "ratios": ratios, "runs": runs,
    }
    text = json.dumps(doc, indent=1)
    print(text)
    if not args.no_save:
        name = save_result(text, "shoot-peers")
        print(f"[shoot_peers] saved bench/results/{name}", file=sys.stderr)


if __name__ == "__main__":
    main()
