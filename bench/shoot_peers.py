#!/usr/bin/env python3
"""tether shoot against the shooters a user would otherwise write, side by side in one run.

    bench/shoot_peers.py                          # tether, SciPy and JAX, best of 3 interleaved; saves bench/results/
    bench/shoot_peers.py --peers tether,scipy --repeats 1 --quick --no-save
    bench/shoot_peers.py --peers tether,jax --backend cuda --jax-platform gpu --replicate 25   # on a GPU

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

--system martinet (beta 0.5, LJM12 eq. (42); an 8 x 8 x 7 grid on [-1, 1]^2 x [-0.3, 0.3])
and --system parallel_parking (the car of MMVW13 §5 without potential; a 6 x 6 x 3 x 3
grid on [-1, 1]^2 x [-0.5, 0.5]^2, guesses of scale 1) pose the same exercise where no
closed form exists: the reference lengths are tether's own at --reference-steps GL3 steps
(480: a discretisation error ~1e-16) with Newton at 1e-13, from the same guesses and
continuation. There the JAX field is (H_p, -H_q) of the Hamiltonian by `jax.grad` (for
the car, H at the multipliers that solve H_lambda = 0: MMVW13 Prop 4), and the SciPy
peer is not written. Each result also gives the largest error over the targets where
the shortest geodesic was kept: the integrator's accuracy apart from the solver's basin.

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
  split over one host device per core, 64-bit; then continuation as above, each
  substep one vmapped solve over the targets left. Timed twice: the first call (compile
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
RANDOM_GUESSES, GUESS_SEED = 8, 1
ROUNDS, SUBSTEPS = 2, 4


# ---------------------------------------------------------------------------
# The problem: targets, guesses (tether's CounterRng), closed-form distance.

def heisenberg_targets(quick):
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
        g.append(PROBLEM["guess_scale"] *
                 np.array(philox_normals(GUESS_SEED, target_index * RANDOM_GUESSES + j, PROBLEM["dof"])))
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


def box_grid(lo, hi, counts, quick):
    """The points of a grid on the box [lo, hi] (every 2nd point per axis with --quick)."""
    axes = [np.linspace(a, b, c)[::2 if quick else 1] for a, b, c in zip(lo, hi, counts)]
    return np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(axes), -1).T


def heisenberg_hamiltonian(q, p, np=np):
    """H = 1/2 ((p_x - y p_z / 2)^2 + (p_y + x p_z / 2)^2): the frame of heisenberg.hpp."""
    return 0.5 * ((p[0] - q[1] * p[2] / 2) ** 2 + (p[1] + q[0] * p[2] / 2) ** 2)


def martinet_hamiltonian(q, p, np=np, beta=0.5):
    """LJM12 eq. (42), as include/tether/systems/martinet.hpp writes it."""
    return 0.5 * ((p[0] + p[2] * q[1] ** 2 / 2) ** 2 + (p[1] / (1 + beta * q[0])) ** 2)


def parking_hamiltonian(q, p, np=np):
    """The car of MMVW13 §5 (include/tether/systems/parallel_parking.hpp, L = alpha = beta = 1,
    no potential): H = 1/2 w^T M^-1 w with w = p + G^T lambda and lambda~ solving
    H_lambda = G M^-1 w = 0 (MMVW13 Prop 4). Along H_lambda = 0 the index-1 flow is the
    Hamiltonian flow of this reduced H(q, p) = H(q, p, lambda~(q, p))."""
    g = np.array([[np.sin(q[3]), -np.cos(q[3]), 0.0, 0.0], [np.sin(q[2]), -np.cos(q[2]), 1.0, 0.0]])
    lam = -np.linalg.solve(g @ g.T, g @ p)  # M = I
    w = p + g.T @ lam
    return 0.5 * w @ w


# Each problem: tether's system, the targets (q0 = 0, T = 1), the random guesses' scale,
# its Hamiltonian H(q, p, np) (the length is sqrt(2 H(q0, p0)) T; JAX integrates its
# (H_p, -H_q) with np = jax.numpy), and the closed-form distance where there is one
# (else the reference is tether at many steps).
PROBLEMS = {
    "heisenberg": {"system": {"name": "heisenberg"}, "dof": 3, "guess_scale": 2.0,
                   "targets": heisenberg_targets, "exact": heisenberg_distance,
                   "hamiltonian": heisenberg_hamiltonian},
    "martinet": {"system": {"name": "martinet", "parameters": {"beta": 0.5}}, "dof": 3, "guess_scale": 2.0,
                 "targets": lambda quick: box_grid([-1, -1, -0.3], [1, 1, 0.3], [8, 8, 7], quick), "exact": None,
                 "hamiltonian": martinet_hamiltonian},
    "parallel_parking": {"system": {"name": "parallel_parking"}, "dof": 4, "guess_scale": 1.0,
                         "targets": lambda quick: box_grid([-1, -1, -0.5, -0.5], [1, 1, 0.5, 0.5], [6, 6, 3, 3], quick),
                         "exact": None, "hamiltonian": parking_hamiltonian},
}
PROBLEM = PROBLEMS["heisenberg"]


def length(p0):
    """The length of the geodesic from q0 = 0 with covector p0: sqrt(2 H) T (H is conserved)."""
    return math.sqrt(2 * PROBLEM["hamiltonian"](np.zeros(PROBLEM["dof"]), np.asarray(p0))) * T_END


def length_errors(tq, lengths, reference):
    """max relative error of the kept lengths against the reference lengths, how many targets
    were solved, and how many of those kept a geodesic that is not the shortest (error > 1e-6)."""
    worst, solved, off = 0.0, 0, 0
    for exact, L in zip(reference, lengths):
        if L is None or not math.isfinite(L) or exact is None:
            continue
        solved += 1
        worst = max(worst, abs(L - exact) / exact)
        off += abs(L - exact) > 1e-6 * exact
    return worst, solved, off


def shortest_error(tq, lengths, reference):
    """max relative length error over the targets where the shortest geodesic was kept: the
    integrator's accuracy, apart from which geodesic the solver found."""
    errors = [abs(L - e) / e for e, L in zip(reference, lengths)
              if L is not None and e is not None and math.isfinite(L) and abs(L - e) <= 1e-6 * e]
    return max(errors, default=0.0)


# ---------------------------------------------------------------------------
# tether

def tether_config(tq, stages, steps, tolerance, accuracy=None, backend="cpu", stall=0):
    """The `tether shoot` config. steps: a fixed step count; or accuracy: shoot.accuracy,
    tether choosing the steps (its first pass at steps, or at its default 16 when steps is
    None); stall: shoot.newton.stall_iterations (0: tether's default, off)."""
    method = {"name": "gauss_legendre", "stages": stages}
    if steps is not None:
        method["steps"] = steps
    config = {
        "system": PROBLEM["system"],
        "method": method,
        "shoot": {
            "q0": [0] * PROBLEM["dof"], "time": T_END,
            "targets": {"list": [list(map(float, q)) for q in tq]},
            "guesses": {"toward": True,
                        "random": {"count": RANDOM_GUESSES, "scale": PROBLEM["guess_scale"], "seed": GUESS_SEED}},
            "newton": {"tolerance": tolerance, "max_iterations": 40, "stall_iterations": stall},
            "continuation": {"rounds": ROUNDS, "substeps": SUBSTEPS},
        },
        "backend": backend,
    }
    if accuracy is not None:
        config["shoot"]["accuracy"] = accuracy
    return config


def run_tether(binary, tq, reference, threads, stages, steps, tolerance, accuracy=None, backend="cpu", stall=0):
    """tether shoot on tether_config(...), judged against the reference lengths (None: this
    run is the reference, its lengths returned)."""
    config = tether_config(tq, stages, steps, tolerance, accuracy, backend, stall)
    summary, rows = tether_shoot(binary, config, threads)
    lengths = [float(r["length"]) if r["converged"] == "1" else None for r in rows]
    if reference is None:  # this run is the reference
        return lengths
    err, solved, off = length_errors(tq, lengths, reference)
    result = {"seconds": summary["shooting_seconds"], "shots": summary["shots"],
              "iterations": summary["shooting_iterations"], "solved": solved, "not_shortest": off,
              "max_rel_length_error": err, "max_rel_length_error_shortest": shortest_error(tq, lengths, reference)}
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
    return ok, sol.x, length(sol.x)


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


def run_scipy(tq, reference, processes):
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
    lengths = [k[1] if k else None for k in kept]
    err, solved, off = length_errors(tq, lengths, reference)
    return {"seconds": seconds, "solved": solved, "not_shortest": off, "max_rel_length_error": err,
            "max_rel_length_error_shortest": shortest_error(tq, lengths, reference)}


# ---------------------------------------------------------------------------
# JAX: diffrax Dopri8 fixed steps, Newton with jax.jacfwd, jit(vmap) over every shot.

def run_jax(tq, reference, steps, iterations, processes, platform):
    """platform: "cpu" (the shots split over one host device per process) or "gpu" (one GPU)."""
    if platform == "gpu":
        os.environ.setdefault("JAX_PLATFORMS", "cuda")
    else:
        os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count={processes}")
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import diffrax

    n = PROBLEM["dof"]
    if PROBLEM is PROBLEMS["heisenberg"]:
        def field(_, y, __):  # written out, as a user with the closed form would
            x, yy, _z, px, py, pz = y
            u, v = px - yy * pz / 2, py + x * pz / 2
            return jnp.array([u, v, -yy * u / 2 + x * v / 2, -v * pz / 2, u * pz / 2, 0.0])
    else:
        def hamiltonian(q, p):
            return PROBLEM["hamiltonian"](q, p, np=jnp)

        grad_q, grad_p = jax.grad(hamiltonian, 0), jax.grad(hamiltonian, 1)

        def field(_, y, __):  # (H_p, -H_q) by automatic differentiation
            q, p = y[:n], y[n:]
            return jnp.concatenate([grad_p(q, p), -grad_q(q, p)])

    term = diffrax.ODETerm(field)
    solver = diffrax.Dopri8()

    def endpoint(p):
        y0 = jnp.concatenate([jnp.zeros(n), p])
        sol = diffrax.diffeqsolve(term, solver, 0.0, T_END, T_END / steps, y0, max_steps=steps,
                                  stepsize_controller=diffrax.ConstantStepSize(), adjoint=diffrax.ForwardMode())
        return sol.ys[-1, :n]

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
    # The shots split over the host devices (one per core), padded to a multiple of their count;
    # on a GPU, all on the one device.
    devices = jax.devices()[:processes]
    if platform == "gpu" and devices[0].platform != "gpu":
        sys.exit(f"error: --jax-platform gpu: JAX sees no GPU (its devices: {jax.devices()})")
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), ("shots",)),
                                          jax.sharding.PartitionSpec("shots"))

    def solve_all(p0, aim):
        count = len(p0)
        pad = -count % len(devices)
        p0 = np.concatenate([p0, np.repeat(p0[-1:], pad, axis=0)])
        aim = np.concatenate([aim, np.repeat(aim[-1:], pad, axis=0)])
        p, r = solve(jax.device_put(p0, sharding), jax.device_put(aim, sharding))
        return np.asarray(p)[:count], np.asarray(r)[:count]

    guess = np.array([g for i, q in enumerate(tq) for g in guesses(i, q)])
    tgt = np.repeat(tq, RANDOM_GUESSES + 1, axis=0)
    per = RANDOM_GUESSES + 1

    def once():
        """Every shot, the shortest converged one per target, then continuation from the
        nearest solved target for those left (as tether and the SciPy peer do)."""
        t0 = time.perf_counter()
        p, r = solve_all(guess, tgt)
        kept = [None] * len(tq)  # (length, p0)
        for k in range(len(guess)):
            if np.isfinite(r[k]) and r[k] <= TOLERANCE:
                L = length(p[k])
                i = k // per
                if kept[i] is None or L < kept[i][0]:
                    kept[i] = (L, p[k])
        for _ in range(ROUNDS):
            todo = [i for i, k in enumerate(kept) if k is None]
            solved = [i for i, k in enumerate(kept) if k is not None]
            if not todo or not solved:
                break
            near = [min(solved, key=lambda s: np.linalg.norm(tq[s] - tq[i])) for i in todo]
            pc = np.array([kept[s][1] for s in near])
            ok = np.ones(len(todo), bool)
            for j in range(1, SUBSTEPS + 1):
                aim = np.array([tq[s] + j / SUBSTEPS * (tq[i] - tq[s]) for s, i in zip(near, todo)])
                pc, rc = solve_all(pc, aim)
                ok &= np.isfinite(rc) & (rc <= TOLERANCE)
            for c, i in enumerate(todo):
                if ok[c]:
                    kept[i] = (length(pc[c]), pc[c])
        return time.perf_counter() - t0, kept, r

    first, _, _ = once()
    second, kept, r = once()
    lengths = [k[0] if k else None for k in kept]
    err, solved, off = length_errors(tq, lengths, reference)
    return {"seconds": second, "seconds_first_call": first, "solved": solved, "not_shortest": off,
            "max_rel_length_error": err, "max_rel_length_error_shortest": shortest_error(tq, lengths, reference),
            "devices": len(devices), "platform": devices[0].platform, "shots_not_converged": int(np.sum(~(r <= TOLERANCE)))}


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
    ap.add_argument("--first-steps", type=int, default=None,
                    help="with --accuracy: tether's first pass at this many steps (default: tether's own, 16)")
    ap.add_argument("--tether-tolerance", type=float, default=1e-12,
                    help="tether's shooting tolerance on |q(T) - q1| (default 1e-12: at 1e-10 the residual "
                         "alone leaves ~1.5e-10 relative length error where the length is ill-conditioned)")
    ap.add_argument("--stall-iterations", default="0",
                    help="tether's shoot.newton.stall_iterations: stop a shot after this many iterations in a row "
                         "that each cut its residual by less than 10%%; a comma list runs each (default 0: off, "
                         "tether's default)")
    ap.add_argument("--write-configs", metavar="DIR", default="",
                    help="write each tether case's config to DIR/<case>.json and stop (for bench/shot_work.cpp)")
    ap.add_argument("--jax-steps", type=int, default=19, help="Dopri8 fixed steps (default 19)")
    ap.add_argument("--jax-iterations", type=int, default=40, help="Newton iterations (default 40)")
    ap.add_argument("--system", default="heisenberg", choices=sorted(PROBLEMS),
                    help="the problem (default heisenberg, judged against its closed form)")
    ap.add_argument("--reference-steps", type=int, default=480,
                    help="without a closed form: tether GL3 at this many steps, Newton 1e-13, is the reference")
    ap.add_argument("--quick", action="store_true", help="a coarser grid of targets")
    ap.add_argument("--replicate", type=int, default=1,
                    help="the grid of targets this many times over, each copy with its own guesses "
                         "(25 on a GPU: 10200 Heisenberg targets, 91800 shots)")
    ap.add_argument("--backend", default="cpu", help="tether's backend (cuda beside JAX on the GPU)")
    ap.add_argument("--jax-platform", default="cpu", choices=("cpu", "gpu"),
                    help="where JAX runs: one host device per process, or the GPU")
    ap.add_argument("--no-save", action="store_true", help="print the JSON only")
    args = ap.parse_args()

    peers = [p for p in args.peers.split(",") if p]
    for p in peers:
        if p not in ("tether", "scipy", "jax"):
            sys.exit(f"error: --peers: unknown peer '{p}' (tether, scipy, jax)")
    if "tether" in peers and not os.access(args.tether, os.X_OK):
        sys.exit(f"error: {args.tether} is not an executable tether binary (build first, or pass --tether)")
    global PROBLEM
    PROBLEM = PROBLEMS[args.system]
    if "scipy" in peers and args.system != "heisenberg":
        sys.exit("error: --peers: the SciPy shooter is written for heisenberg only")
    if args.replicate < 1:
        sys.exit("error: --replicate must be at least 1")
    tq = np.tile(PROBLEM["targets"](args.quick), (args.replicate, 1))
    if PROBLEM["exact"]:
        reference = [PROBLEM["exact"](q) for q in tq]
        reference_from = "the closed-form distance"
    else:
        if not os.access(args.tether, os.X_OK):
            sys.exit(f"error: {args.tether} is needed for the reference lengths (build first, or pass --tether)")
        print(f"[shoot_peers] reference: tether GL3, {args.reference_steps} steps", file=sys.stderr)
        reference = run_tether(args.tether, tq, None, args.processes, 3, args.reference_steps, 1e-13)
        reference_from = (f"tether gauss_legendre 3 stages, {args.reference_steps} steps, Newton 1e-13 "
                          f"(its discretisation error ~ (1/{args.reference_steps})^6), the same guesses and continuation")
        if any(L is None for L in reference):
            print(f"[shoot_peers] the reference left {sum(L is None for L in reference)} targets unsolved: "
                  "they are not judged", file=sys.stderr)
    steps = [int(s) for s in args.steps.split(",") if s]
    accuracies = [float(a) for a in args.accuracy.split(",") if a]
    judged = sum(L is not None for L in reference)
    stalls = [int(k) for k in str(args.stall_iterations).split(",") if k]
    # A tether label: its steps or accuracy, then "_stall<k>" where shots stop after k slow iterations.
    tethers = {}
    for k in stalls if "tether" in peers else []:
        tail = f"_stall{k}" if k else ""
        tethers.update({f"tether_gl{args.stages}_{n}{tail}": dict(steps=n, accuracy=None, stall=k) for n in steps})
        tethers.update({f"tether_gl{args.stages}_accuracy_{a:g}{tail}": dict(steps=args.first_steps, accuracy=a, stall=k)
                        for a in accuracies})
    labels = list(tethers) + [p for p in peers if p != "tether"]
    if args.write_configs:  # each tether case's config, for tether_shot_work or a run by hand
        os.makedirs(args.write_configs, exist_ok=True)
        for p, case in tethers.items():
            config = tether_config(tq, args.stages, case["steps"], args.tether_tolerance, case["accuracy"],
                                   args.backend, case["stall"])
            with open(os.path.join(args.write_configs, f"{p}.json"), "w") as f:
                json.dump(config, f, indent=1)
        return
    runs = {p: [] for p in labels}
    for rep in range(args.repeats):
        for p in labels:
            if p == "scipy" and rep >= (args.scipy_repeats or args.repeats):
                continue
            print(f"[shoot_peers] run {rep + 1}/{args.repeats}: {p}", file=sys.stderr)
            if p in tethers:
                case = tethers[p]
                r = run_tether(args.tether, tq, reference, args.processes, args.stages, case["steps"],
                               args.tether_tolerance, case["accuracy"], args.backend, case["stall"])
            elif p == "scipy":
                r = run_scipy(tq, reference, args.processes)
            else:
                r = run_jax(tq, reference, args.jax_steps, args.jax_iterations, args.processes, args.jax_platform)
            r["targets_per_second"] = len(tq) / r["seconds"]
            runs[p].append(r)
            print(f"[shoot_peers]   {len(tq) / r['seconds']:.2f} targets/s, {r['solved']}/{judged} solved "
                  f"({r['not_shortest']} not the shortest), max rel. length error {r['max_rel_length_error']:.2e} "
                  f"({r['max_rel_length_error_shortest']:.2e} where the shortest was kept)",
                  file=sys.stderr)
    best = {p: max(rs, key=lambda r: r["targets_per_second"]) for p, rs in runs.items()}
    ratios = {}
    for t in (p for p in best if p.startswith("tether")):
        for p in (p for p in best if not p.startswith("tether")):
            ratios[f"{t}_over_{p}"] = best[t]["targets_per_second"] / best[p]["targets_per_second"]
    doc = {
        "benchmark": f"{args.system} shooting, tether against peers",
        **provenance(),
        "settings": {"system": PROBLEM["system"], "targets": len(tq), "replicate": args.replicate,
                     "tether_backend": args.backend, "jax_platform": args.jax_platform, "guesses_per_target": RANDOM_GUESSES + 1,
                     "guess_scale": PROBLEM["guess_scale"], "tolerance": TOLERANCE, "accuracy_judged_against": reference_from,
                     "processes": args.processes, "tether": f"gauss_legendre stages {args.stages}, steps {args.steps}, accuracy {args.accuracy or '-'} (first pass {args.first_steps or 16} steps), "
                                                f"tolerance {args.tether_tolerance}, stall_iterations {args.stall_iterations}",
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
