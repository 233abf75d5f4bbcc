#!/usr/bin/env python3
"""`tether run` (cpu backend) beside what a physicist would write by hand: Numba and JAX RATTLE.

    bench/rattle_peers.py --tether build-cpu/tether          # saves bench/results/<date>-<host>-rattle-peers.json
    bench/rattle_peers.py --tether build-cpu/tether --quick  # a smaller run, not saved

Cases (the speed issue's table): the spherical pendulum (10^5 trajectories, dt 0.01) and
the united-atom chain of configs/chain16.json with 8 and 16 beads (10^4 trajectories,
dt 0.002), RATTLE, Newton tolerance 1e-13, thermal starts.

Same scheme, same accuracy. Every peer is a plain transcription of tether's step
(include/tether/methods/rattle.hpp, projection.hpp): the half kick and drift to q_pred,
Newton on the multipliers with the Gram matrix G(q) M^-1 G(q0)^T (tridiagonal for the
chain, solved by the Thomas algorithm) until max |g| <= max(tol L, 16 eps max|q|), the
end kick, and the momentum projection onto the cotangent space. Every peer starts from
tether's own initial states (a 0-step `tether run` writes them) and its final q and p
are compared with tether's: agreement to ~1e-12 is the equal-accuracy evidence.

Peers, each with its own best practice:
- numba: `@njit(parallel=True)`, `prange` over trajectories, scalar code per bead,
  fastmath off, the state in one (trajectories, beads, 3) array;
- numba_fsal: the same, carrying the force at a step's end into the next step
  (first-same-as-last), which a Numba user would do since RATTLE's end kick and the
  next step's first kick evaluate the same gradient;
- jax: `jit(vmap(...))` over trajectories (on the CPU, or the GPU where JAX has one),
  `lax.fori_loop` over steps, `lax.while_loop` for Newton, `lax.linalg.tridiagonal_solve` (float64);
- numba_cuda, numba_cuda_fsal (--peers, on a GPU machine, with --backend cuda): one thread per
  trajectory, the Numba peers' own step functions compiled as device functions, a chain's
  arrays in cuda.local.array, FP64; timed by CUDA events around the launch (compile and
  transfers excluded). Their kernels close over the parameters and the step size, which Numba
  compiles as constants; numba_cuda_args and numba_cuda_fsal_args take them as arguments, as
  tether's kernels do. tests/python/test_gpu_peers.py runs them in Numba's CUDA simulator.
Each is timed after a warm-up call that compiles it; the figure is trajectory-steps
per second, best of --repeats interleaved runs, on --threads threads. tether's is
its own `integration_seconds` (summary.json); its build's instruction set
(TETHER_CPU_ARCH, read from the build folder's CMakeCache.txt) is recorded, since it
sets how many trajectories the cpu backend steps per vector instruction.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda 0.2x overloads np.row_stack, which NumPy 2.5 removed
    np.row_stack = np.vstack
try:  # the numba.cuda peers: their kernels name `cuda` as a module global, which the CUDA simulator replaces
    from numba import cuda
except ImportError:
    cuda = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_shoot_bench import ROOT, build_of, provenance, read_final_states, save_result, tether_output  # noqa: E402

EPS = 2.220446049250313e-16
TOL, MAX_IT = 1e-13, 50


def chain_config(beads):
    with open(os.path.join(ROOT, "configs", "chain16.json")) as f:
        config = json.load(f)
    config["system"]["parameters"]["beads"] = beads
    return config


def cases(quick):
    with open(os.path.join(ROOT, "configs", "spherical_pendulum.json")) as f:
        pendulum = json.load(f)
    k = 10 if quick else 1
    return [("spherical_pendulum", pendulum, 100000 // k, 0.01, 1000 // k),
            ("chain8", chain_config(8), 10000 // k, 0.002, 1000 // k),
            ("chain16", chain_config(16), 10000 // k, 0.002, 500 // k)]


def peer_arguments(name, prm, dt, fsal):
    """The case's parameters as every Numba peer's run takes them (after a chain's bead count): m, L,
    gravity, h for the pendulum; m, b, bend stiffness, cos theta0, torsion, whether there is torsion,
    h and whether the force is carried for a chain."""
    if name == "spherical_pendulum":
        return prm["mass"], prm["length"], prm["gravity"], dt
    tor = np.array(prm["torsion"], dtype=np.float64)
    return (prm["mass"], prm["bond_length"], prm["bend_stiffness"], np.cos(np.radians(prm["bend_angle_degrees"])),
            tor, bool(np.any(tor != 0)), dt, fsal)


def numba_cuda_peers(name):
    """(peer, fsal, constants) for each numba.cuda variant of the case (the pendulum has no force to carry)."""
    for fsal, constants in ((False, True), (True, True), (False, False), (True, False)):
        if not (fsal and name == "spherical_pendulum"):
            yield "numba_cuda" + ("_fsal" if fsal else "") + ("" if constants else "_args"), fsal, constants


def run_tether(binary, config, size, dt, steps, threads, backend="cpu"):
    config = dict(config, backend=backend, output={"every": max(steps, 1), "final_states": True})
    config["method"] = dict(config["method"], dt=dt, steps=steps, newton={"tolerance": TOL, "max_iterations": MAX_IT})
    config["ensemble"] = dict(config["ensemble"], size=size)
    with tether_output(binary, "run", config, threads) as (out, summary):
        table = read_final_states(os.path.join(out, "final.csv"))
    dof = sum(1 for name in table if name.startswith("q"))
    q = np.stack([table[f"q{c}"] for c in range(dof)], axis=1).astype(np.float64)
    p = np.stack([table[f"p{c}"] for c in range(dof)], axis=1).astype(np.float64)
    return summary, q, p, int(np.sum(table["status"] != "ok"))


# ---------------------------------------------------------------- Numba ----

def step_functions(jit):
    """The RATTLE step functions as plain Python, compiled by `jit` for one Numba target: the CPU
    (njit, inlined) or a GPU (cuda.jit device functions), so that both peers step the same code."""

    @jit
    def thomas(lower, diag, upper, rhs, x, c, d, k):
        den = diag[0]
        c[0] = upper[0] / den
        d[0] = rhs[0] / den
        for i in range(1, k):
            den = diag[i] - lower[i] * c[i - 1]
            c[i] = upper[i] / den
            d[i] = (rhs[i] - lower[i] * d[i - 1]) / den
        x[k - 1] = d[k - 1]
        for i in range(k - 2, -1, -1):
            x[i] = d[i] - c[i] * x[i + 1]

    @jit
    def chain_gradient(q, g, n, stiff, c0, tor, has_tor):
        for i in range(n):
            for a in range(3):
                g[i, a] = 0.0
        for i in range(n - 2):
            ax = q[i + 1, 0] - q[i, 0]; ay = q[i + 1, 1] - q[i, 1]; az = q[i + 1, 2] - q[i, 2]
            bx = q[i + 2, 0] - q[i + 1, 0]; by = q[i + 2, 1] - q[i + 1, 1]; bz = q[i + 2, 2] - q[i + 1, 2]
            na = math.sqrt(ax * ax + ay * ay + az * az); nb = math.sqrt(bx * bx + by * by + bz * bz)
            c = -(ax * bx + ay * by + az * bz) / (na * nb)
            f = stiff * (c - c0)
            gax = f * (-bx / (na * nb) - c * ax / (na * na))
            gay = f * (-by / (na * nb) - c * ay / (na * na))
            gaz = f * (-bz / (na * nb) - c * az / (na * na))
            gbx = f * (-ax / (na * nb) - c * bx / (nb * nb))
            gby = f * (-ay / (na * nb) - c * by / (nb * nb))
            gbz = f * (-az / (na * nb) - c * bz / (nb * nb))
            g[i, 0] -= gax; g[i, 1] -= gay; g[i, 2] -= gaz
            g[i + 1, 0] += gax - gbx; g[i + 1, 1] += gay - gby; g[i + 1, 2] += gaz - gbz
            g[i + 2, 0] += gbx; g[i + 2, 1] += gby; g[i + 2, 2] += gbz
        if has_tor:
            for i in range(n - 3):
                d0x = q[i + 1, 0] - q[i, 0]; d0y = q[i + 1, 1] - q[i, 1]; d0z = q[i + 1, 2] - q[i, 2]
                d1x = q[i + 2, 0] - q[i + 1, 0]; d1y = q[i + 2, 1] - q[i + 1, 1]; d1z = q[i + 2, 2] - q[i + 1, 2]
                d2x = q[i + 3, 0] - q[i + 2, 0]; d2y = q[i + 3, 1] - q[i + 2, 1]; d2z = q[i + 3, 2] - q[i + 2, 2]
                n1x = d0y * d1z - d0z * d1y; n1y = d0z * d1x - d0x * d1z; n1z = d0x * d1y - d0y * d1x
                n2x = d1y * d2z - d1z * d2y; n2y = d1z * d2x - d1x * d2z; n2z = d1x * d2y - d1y * d2x
                l1 = math.sqrt(n1x * n1x + n1y * n1y + n1z * n1z); l2 = math.sqrt(n2x * n2x + n2y * n2y + n2z * n2z)
                c = (n1x * n2x + n1y * n2y + n1z * n2z) / (l1 * l2)
                cp = -c  # cos psi, psi = phi - pi
                dv = 0.0
                pw = 1.0
                for m in range(1, 6):
                    dv += m * tor[m] * pw
                    pw *= cp
                f = -dv
                g1x = f * (n2x / (l1 * l2) - c * n1x / (l1 * l1))
                g1y = f * (n2y / (l1 * l2) - c * n1y / (l1 * l1))
                g1z = f * (n2z / (l1 * l2) - c * n1z / (l1 * l1))
                g2x = f * (n1x / (l1 * l2) - c * n2x / (l2 * l2))
                g2y = f * (n1y / (l1 * l2) - c * n2y / (l2 * l2))
                g2z = f * (n1z / (l1 * l2) - c * n2z / (l2 * l2))
                e0x = d1y * g1z - d1z * g1y; e0y = d1z * g1x - d1x * g1z; e0z = d1x * g1y - d1y * g1x
                e1x = (g1y * d0z - g1z * d0y) + (d2y * g2z - d2z * g2y)
                e1y = (g1z * d0x - g1x * d0z) + (d2z * g2x - d2x * g2z)
                e1z = (g1x * d0y - g1y * d0x) + (d2x * g2y - d2y * g2x)
                e2x = g2y * d1z - g2z * d1y; e2y = g2z * d1x - g2x * d1z; e2z = g2x * d1y - g2y * d1x
                g[i, 0] -= e0x; g[i, 1] -= e0y; g[i, 2] -= e0z
                g[i + 1, 0] += e0x - e1x; g[i + 1, 1] += e0y - e1y; g[i + 1, 2] += e0z - e1z
                g[i + 2, 0] += e1x - e2x; g[i + 2, 1] += e1y - e2y; g[i + 2, 2] += e1z - e2z
                g[i + 3, 0] += e2x; g[i + 3, 1] += e2y; g[i + 3, 2] += e2z

    @jit
    def chain_step(q, p, g, qp, q1, lam, con, lower, diag, upper, rhs, x, c, d,
                   n, m, b, stiff, c0, tor, has_tor, h, fsal):
        k = n - 1
        if not fsal:
            chain_gradient(q, g, n, stiff, c0, tor, has_tor)
        for i in range(n):
            for a in range(3):
                qp[i, a] = q[i, a] + h / m * (p[i, a] - 0.5 * h * g[i, a])
                q1[i, a] = qp[i, a]
        for i in range(k):
            lam[i] = 0.0
        s = 1.0 / (m * b * b)
        it = 0
        while True:
            gmax = 0.0
            qmax = 0.0
            for i in range(k):
                dx = q1[i + 1, 0] - q1[i, 0]; dy = q1[i + 1, 1] - q1[i, 1]; dz = q1[i + 1, 2] - q1[i, 2]
                con[i] = (dx * dx + dy * dy + dz * dz - b * b) / (2 * b)
                gmax = max(gmax, abs(con[i]))
            for i in range(n):
                for a in range(3):
                    qmax = max(qmax, abs(q1[i, a]))
            if not math.isfinite(gmax):
                return False
            if gmax <= max(TOL * b, 16 * EPS * qmax):
                break
            if it >= MAX_IT:
                return False
            for i in range(k):  # Gram G(q1) M^-1 G(q)^T, tridiagonal
                ax = q1[i + 1, 0] - q1[i, 0]; ay = q1[i + 1, 1] - q1[i, 1]; az = q1[i + 1, 2] - q1[i, 2]
                diag[i] = 2 * s * (ax * (q[i + 1, 0] - q[i, 0]) + ay * (q[i + 1, 1] - q[i, 1]) + az * (q[i + 1, 2] - q[i, 2]))
                lower[i] = -s * (ax * (q[i, 0] - q[i - 1, 0]) + ay * (q[i, 1] - q[i - 1, 1]) + az * (q[i, 2] - q[i - 1, 2])) if i > 0 else 0.0
                upper[i] = -s * (ax * (q[i + 2, 0] - q[i + 1, 0]) + ay * (q[i + 2, 1] - q[i + 1, 1]) + az * (q[i + 2, 2] - q[i + 1, 2])) if i + 1 < k else 0.0
                rhs[i] = -con[i]
            thomas(lower, diag, upper, rhs, x, c, d, k)
            for i in range(k):
                lam[i] += x[i]
            for i in range(n):
                for a in range(3):
                    q1[i, a] = qp[i, a]
            for i in range(k):  # q1 = q_pred + M^-1 G(q)^T lambda
                for a in range(3):
                    f = (q[i + 1, a] - q[i, a]) * (lam[i] / b) / m
                    q1[i, a] -= f
                    q1[i + 1, a] += f
            it += 1
        chain_gradient(q1, g, n, stiff, c0, tor, has_tor)
        for i in range(n):
            for a in range(3):
                p[i, a] = m * (q1[i, a] - q[i, a]) / h - 0.5 * h * g[i, a]
                q[i, a] = q1[i, a]
        for i in range(k):  # project p onto T*_q N: (G M^-1 G^T) nu = -G M^-1 p
            ax = q[i + 1, 0] - q[i, 0]; ay = q[i + 1, 1] - q[i, 1]; az = q[i + 1, 2] - q[i, 2]
            rhs[i] = -(ax * (p[i + 1, 0] - p[i, 0]) + ay * (p[i + 1, 1] - p[i, 1]) + az * (p[i + 1, 2] - p[i, 2])) / (m * b)
            diag[i] = 2 * s * (ax * ax + ay * ay + az * az)
            lower[i] = -s * (ax * (q[i, 0] - q[i - 1, 0]) + ay * (q[i, 1] - q[i - 1, 1]) + az * (q[i, 2] - q[i - 1, 2])) if i > 0 else 0.0
            upper[i] = -s * (ax * (q[i + 2, 0] - q[i + 1, 0]) + ay * (q[i + 2, 1] - q[i + 1, 1]) + az * (q[i + 2, 2] - q[i + 1, 2])) if i + 1 < k else 0.0
        thomas(lower, diag, upper, rhs, x, c, d, k)
        for i in range(k):
            for a in range(3):
                f = (q[i + 1, a] - q[i, a]) * (x[i] / b)
                p[i, a] -= f
                p[i + 1, a] += f
        return True

    @jit
    def pendulum_step(x, y, z, px, py, pz, m, L, gz, h):
        """One step from (q, p); the new state and whether Newton converged."""
        qpx = x + h / m * px; qpy = y + h / m * py; qpz = z + h / m * (pz - 0.5 * h * gz)
        x1, y1, z1 = qpx, qpy, qpz
        lam = 0.0
        it = 0
        while True:
            g = (x1 * x1 + y1 * y1 + z1 * z1 - L * L) / (2 * L)
            if not math.isfinite(g):
                return x, y, z, px, py, pz, False
            if abs(g) <= max(TOL * L, 16 * EPS * max(abs(x1), abs(y1), abs(z1))):
                break
            if it >= MAX_IT:
                return x, y, z, px, py, pz, False
            gram = (x1 * x + y1 * y + z1 * z) / (m * L * L)
            lam += -g / gram
            f = lam / L / m
            x1 = qpx + f * x; y1 = qpy + f * y; z1 = qpz + f * z
            it += 1
        px = m * (x1 - x) / h; py = m * (y1 - y) / h; pz = m * (z1 - z) / h - 0.5 * h * gz
        x, y, z = x1, y1, z1
        nu = -(x * px + y * py + z * pz) / (m * L) / ((x * x + y * y + z * z) / (m * L * L))
        return x, y, z, px + x * nu / L, py + y * nu / L, pz + z * nu / L, True

    # One trajectory's whole run, the same on both targets: its state in row t of Q and P (read,
    # then written back, as far as it got), False where a step failed.
    @jit
    def pendulum_run(Q, P, t, steps, m, L, grav, h):
        # V = m g z: the gradient is constant, so there is no force to carry.
        x, y, z = Q[t, 0], Q[t, 1], Q[t, 2]
        px, py, pz = P[t, 0], P[t, 1], P[t, 2]
        good = True
        for _ in range(steps):
            x, y, z, px, py, pz, good = pendulum_step(x, y, z, px, py, pz, m, L, m * grav, h)
            if not good:
                break
        Q[t, 0], Q[t, 1], Q[t, 2] = x, y, z
        P[t, 0], P[t, 1], P[t, 2] = px, py, pz
        return good

    @jit
    def chain_run(Q, P, t, q, p, g, qp, q1, lam, con, lower, diag, upper, rhs, x, c, d,
                  steps, n, m, b, stiff, c0, tor, has_tor, h, fsal):
        for i in range(n):
            for a in range(3):
                q[i, a] = Q[t, i, a]
                p[i, a] = P[t, i, a]
        if fsal:
            chain_gradient(q, g, n, stiff, c0, tor, has_tor)
        good = True
        for _ in range(steps):
            if not chain_step(q, p, g, qp, q1, lam, con, lower, diag, upper, rhs, x, c, d,
                              n, m, b, stiff, c0, tor, has_tor, h, fsal):
                good = False
                break
        for i in range(n):
            for a in range(3):
                Q[t, i, a] = q[i, a]
                P[t, i, a] = p[i, a]
        return good

    return pendulum_run, chain_run


def numba_kernels():
    import numba
    from numba import njit, prange

    pendulum_trajectory, chain_trajectory = step_functions(njit(inline="always"))

    @njit(parallel=True)
    def chain_run(Q, P, steps, m, b, stiff, c0, tor, has_tor, h, fsal):
        T, n = Q.shape[0], Q.shape[1]
        k = n - 1
        ok = np.ones(T, dtype=np.bool_)
        for t in prange(T):
            q = np.empty((n, 3)); p = np.empty((n, 3))
            g = np.empty((n, 3)); qp = np.empty((n, 3)); q1 = np.empty((n, 3))
            lam = np.empty(k); con = np.empty(k); lower = np.empty(k); diag = np.empty(k); upper = np.empty(k)
            rhs = np.empty(k); x = np.empty(k); c = np.empty(k); d = np.empty(k)
            ok[t] = chain_trajectory(Q, P, t, q, p, g, qp, q1, lam, con, lower, diag, upper, rhs, x, c, d,
                                     steps, n, m, b, stiff, c0, tor, has_tor, h, fsal)
        return ok

    @njit(parallel=True)
    def pendulum_run(Q, P, steps, m, L, grav, h):
        ok = np.ones(Q.shape[0], dtype=np.bool_)
        for t in prange(Q.shape[0]):
            ok[t] = pendulum_trajectory(Q, P, t, steps, m, L, grav, h)
        return ok

    return numba, chain_run, pendulum_run


# ----------------------------------------------------------- numba.cuda ----

def numba_cuda_kernels(constants=True):
    """What a physicist writes with numba.cuda: one thread per trajectory, the same step functions as
    the CPU peer compiled as device functions, a chain's work arrays in cuda.local.array (so one
    kernel per bead count), FP64. Each returns a runner (Q, P, steps) -> (ok, kernel seconds), the
    seconds between CUDA events around the launch (compile excluded: call it once first).

    constants: the parameters and the step size are the kernel's closure, which Numba compiles as
    constants (as a numba.cuda user writes it: divisions by m = L = 1 fold away); else they are the
    kernel's arguments, as tether's kernels and the CPU Numba peer take them (the bead count and
    whether there is torsion stay compiled in, as they are in tether)."""
    from numba import float64

    pendulum_trajectory, chain_trajectory = step_functions(cuda.jit(device=True, inline=True))
    threads = 128

    def timed(kernel, blocks, *args):
        start, stop = cuda.event(), cuda.event()
        start.record()
        kernel[blocks, threads](*args)
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    def pendulum(m, L, grav, h):
        if constants:
            @cuda.jit
            def kernel(Q, P, steps, ok):
                t = cuda.grid(1)
                if t < Q.shape[0]:
                    ok[t] = pendulum_trajectory(Q, P, t, steps, m, L, grav, h)
            return kernel, ()

        @cuda.jit
        def kernel_args(Q, P, steps, ok, m_, L_, grav_, h_):
            t = cuda.grid(1)
            if t < Q.shape[0]:
                ok[t] = pendulum_trajectory(Q, P, t, steps, m_, L_, grav_, h_)
        return kernel_args, (m, L, grav, h)

    def chain(n, m, b, stiff, c0, tor, has_tor, h, fsal):
        k = n - 1

        @cuda.jit(device=True, inline=True)
        def run_chain(Q, P, t, steps, ok, m_, b_, stiff_, c0_, tor_, h_):
            q = cuda.local.array((n, 3), float64); p = cuda.local.array((n, 3), float64)
            g = cuda.local.array((n, 3), float64); qp = cuda.local.array((n, 3), float64)
            q1 = cuda.local.array((n, 3), float64)
            lam = cuda.local.array(k, float64); con = cuda.local.array(k, float64)
            lower = cuda.local.array(k, float64); diag = cuda.local.array(k, float64)
            upper = cuda.local.array(k, float64); rhs = cuda.local.array(k, float64)
            x = cuda.local.array(k, float64); c = cuda.local.array(k, float64); d = cuda.local.array(k, float64)
            torsion = cuda.local.array(6, float64)
            for i in range(6):
                torsion[i] = tor_[i]
            ok[t] = chain_trajectory(Q, P, t, q, p, g, qp, q1, lam, con, lower, diag, upper, rhs, x, c, d,
                                     steps, n, m_, b_, stiff_, c0_, torsion, has_tor, h_, fsal)

        if constants:
            @cuda.jit
            def kernel(Q, P, steps, ok):
                t = cuda.grid(1)
                if t < Q.shape[0]:
                    run_chain(Q, P, t, steps, ok, m, b, stiff, c0, tor, h)
            return kernel, ()

        @cuda.jit
        def kernel_args(Q, P, steps, ok, m_, b_, stiff_, c0_, tor_, h_):
            t = cuda.grid(1)
            if t < Q.shape[0]:
                run_chain(Q, P, t, steps, ok, m_, b_, stiff_, c0_, tor_, h_)
        return kernel_args, (m, b, stiff, c0, np.asarray(tor, dtype=np.float64), h)

    def runner(kernel_and_args):
        kernel, args = kernel_and_args
        args = tuple(cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args)  # copied once, not per launch

        def run(Q, P, steps):
            dQ, dP = cuda.to_device(Q), cuda.to_device(P)
            ok = cuda.to_device(np.ones(len(Q), dtype=np.bool_))
            seconds = timed(kernel, (len(Q) + threads - 1) // threads, dQ, dP, steps, ok, *args)
            dQ.copy_to_host(Q)
            dP.copy_to_host(P)
            return ok.copy_to_host(), seconds
        return run

    # The runners, and the kernels with their arguments (for write_ptx).
    return cuda, lambda *a: runner(pendulum(*a)), lambda *a: runner(chain(*a)), pendulum, chain


def write_ptx(directory, names):
    """The numba.cuda peers' kernels as PTX for sm_90, compiled on any machine (no GPU needed), as
    <case>-<peer>.ptx: `ptxas -arch=sm_90` makes machine code of them, for bench/sass_loops.py --ops."""
    import numba
    os.makedirs(directory, exist_ok=True)
    for name, config, _, dt, steps in cases(True):
        if name not in names:
            continue
        prm = config["system"]["parameters"]
        for peer, fsal, constants in numba_cuda_peers(name):
            _, _, _, pendulum, chain = numba_cuda_kernels(constants)
            if name == "spherical_pendulum":
                kernel, args = pendulum(*peer_arguments(name, prm, dt, fsal))
                Q = np.zeros((1, 3))
            else:
                kernel, args = chain(prm["beads"], *peer_arguments(name, prm, dt, fsal))
                Q = np.zeros((1, prm["beads"], 3))
            signature = tuple(numba.typeof(x) for x in (Q, Q, steps, np.ones(1, dtype=np.bool_), *args))
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
            path = os.path.join(directory, f"{name}-{peer}.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            print("wrote " + path, file=sys.stderr)


# ------------------------------------------------------------------ JAX ----

def jax_runner(name, prm, dt, steps):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    h = dt
    if name == "spherical_pendulum":
        m, L, grav = prm["mass"], prm["length"], prm["gravity"]
        gvec = jnp.array([0.0, 0.0, m * grav])

        def step(state):
            q, p = state
            qp = q + h / m * (p - 0.5 * h * gvec)

            def cond(c):
                q1, lam, it, done = c
                return ~done

            def body(c):
                q1, lam, it, _ = c
                g = (q1 @ q1 - L * L) / (2 * L)
                conv = (jnp.abs(g) <= jnp.maximum(TOL * L, 16 * EPS * jnp.max(jnp.abs(q1)))) | (it >= MAX_IT)
                lam2 = lam - g / ((q1 @ q) / (m * L * L))
                q2 = qp + q * (lam2 / L / m)
                return (jnp.where(conv, q1, q2), jnp.where(conv, lam, lam2), it + 1, conv)

            q1, _, _, _ = lax.while_loop(cond, body, (qp, 0.0, 0, False))
            p1 = m * (q1 - q) / h - 0.5 * h * gvec
            nu = -(q1 @ p1) / (m * L) / ((q1 @ q1) / (m * L * L))
            return q1, p1 + q1 * (nu / L)
    else:
        n = prm["beads"]
        m, b, stiff = prm["mass"], prm["bond_length"], prm["bend_stiffness"]
        c0 = np.cos(np.radians(prm["bend_angle_degrees"]))
        tor = jnp.array(prm["torsion"], dtype=jnp.float64)
        s = 1.0 / (m * b * b)

        def potential(q):
            d = q[1:] - q[:-1]
            a, bb = d[:-1], d[1:]
            cb = -jnp.sum(a * bb, axis=1) / (jnp.linalg.norm(a, axis=1) * jnp.linalg.norm(bb, axis=1))
            v = 0.5 * stiff * jnp.sum((cb - c0) ** 2)
            n1 = jnp.cross(d[:-2], d[1:-1])
            n2 = jnp.cross(d[1:-1], d[2:])
            cphi = jnp.sum(n1 * n2, axis=1) / (jnp.linalg.norm(n1, axis=1) * jnp.linalg.norm(n2, axis=1))
            cpsi = -cphi
            return v + jnp.sum(jnp.polyval(tor[::-1], cpsi))

        grad = jax.grad(potential)

        def gram(qa, qb):
            da, db = qa[1:] - qa[:-1], qb[1:] - qb[:-1]
            diag = 2 * s * jnp.sum(da * db, axis=1)
            lower = jnp.concatenate([jnp.zeros(1), -s * jnp.sum(da[1:] * db[:-1], axis=1)])
            upper = jnp.concatenate([-s * jnp.sum(da[:-1] * db[1:], axis=1), jnp.zeros(1)])
            return lower, diag, upper

        def gt_times(q, lam):  # G(q)^T lambda
            f = (q[1:] - q[:-1]) * (lam / b)[:, None]
            return jnp.zeros_like(q).at[:-1].add(-f).at[1:].add(f)

        def tsolve(lower, diag, upper, rhs):
            return lax.linalg.tridiagonal_solve(lower, diag, upper, rhs[:, None])[:, 0]

        def step(state):
            q, p = state
            qp = q + h / m * (p - 0.5 * h * grad(q))

            def cond(c):
                return ~c[3]

            def body(c):
                q1, lam, it, _ = c
                d = q1[1:] - q1[:-1]
                g = (jnp.sum(d * d, axis=1) - b * b) / (2 * b)
                conv = (jnp.max(jnp.abs(g)) <= jnp.maximum(TOL * b, 16 * EPS * jnp.max(jnp.abs(q1)))) | (it >= MAX_IT)
                lam2 = lam + tsolve(*gram(q1, q), -g)
                q2 = qp + gt_times(q, lam2) / m
                return (jnp.where(conv, q1, q2), jnp.where(conv, lam, lam2), it + 1, conv)

            q1, _, _, _ = lax.while_loop(cond, body, (qp, jnp.zeros(n - 1), 0, False))
            p1 = m * (q1 - q) / h - 0.5 * h * grad(q1)
            d = q1[1:] - q1[:-1]
            rhs = -jnp.sum(d * (p1[1:] - p1[:-1]), axis=1) / (m * b)
            nu = tsolve(*gram(q1, q1), rhs)
            return q1, p1 + gt_times(q1, nu)

    def trajectory(q, p):
        return lax.fori_loop(0, steps, lambda _, st: step(st), (q, p))

    return jax.jit(jax.vmap(trajectory))


# ----------------------------------------------------------------- main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tether", default=os.path.join(ROOT, "build", "tether"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="10x smaller ensembles and step counts; nothing saved")
    ap.add_argument("--peers", default="numba,numba_fsal,jax",
                    help="also numba_cuda,numba_cuda_fsal (parameters compiled in) and numba_cuda_args,"
                         "numba_cuda_fsal_args (parameters as arguments) on a GPU machine (kernel time by CUDA events)")
    ap.add_argument("--backend", default="cpu", help="tether's backend (cuda beside the numba.cuda peers)")
    ap.add_argument("--cases", default="spherical_pendulum,chain8,chain16")
    ap.add_argument("--scale", type=int, default=1, help="ensembles this many times larger (10 on a GPU: 10^6 pendula)")
    ap.add_argument("--label", default="", help="appended to the result's name (e.g. native for a TETHER_CPU_ARCH build)")
    ap.add_argument("--ptx", metavar="DIR", help="only write the numba.cuda peers' PTX for sm_90 into DIR (no GPU needed)")
    args = ap.parse_args()
    if args.ptx:
        return write_ptx(args.ptx, args.cases.split(","))
    os.environ["NUMBA_NUM_THREADS"] = str(args.threads)
    peers = args.peers.split(",")
    numba, chain_run, pendulum_run = numba_kernels()
    numba.set_num_threads(args.threads)

    results = []
    for name, config, size, dt, steps in cases(args.quick):
        if name not in args.cases.split(","):
            continue
        size *= args.scale
        prm = config["system"]["parameters"]
        _, q0, p0, _ = run_tether(args.tether, config, size, dt, 0, args.threads)
        dof = q0.shape[1]

        def numba_call(fsal, Q, P, nsteps):
            if name == "spherical_pendulum":
                return pendulum_run(Q, P, nsteps, *peer_arguments(name, prm, dt, fsal))
            Q3, P3 = Q.reshape(len(Q), dof // 3, 3), P.reshape(len(P), dof // 3, 3)
            return chain_run(Q3, P3, nsteps, *peer_arguments(name, prm, dt, fsal))

        runners = {}
        if "numba" in peers or "numba_fsal" in peers:
            for fsal in (False, True):
                numba_call(fsal, q0[:4].copy(), p0[:4].copy(), 2)  # compile
        if "numba" in peers:
            runners["numba"] = lambda Q, P: numba_call(False, Q, P, steps)
        if "numba_fsal" in peers and name != "spherical_pendulum":
            runners["numba_fsal"] = lambda Q, P: numba_call(True, Q, P, steps)
        for peer, fsal, constants in numba_cuda_peers(name):
            if peer not in peers:
                continue
            _, cuda_pendulum, cuda_chain, *_ = numba_cuda_kernels(constants)
            if name == "spherical_pendulum":
                kernel = cuda_pendulum(*peer_arguments(name, prm, dt, fsal))
            else:
                kernel = cuda_chain(dof // 3, *peer_arguments(name, prm, dt, fsal))

            def cuda_call(Q, P, kernel=kernel):  # the kernel's own seconds (CUDA events), transfers excluded
                shape = (len(Q), dof // 3, 3) if name != "spherical_pendulum" else Q.shape
                Q3, P3 = Q.reshape(shape), P.reshape(shape)
                ok, seconds = kernel(Q3, P3, steps)
                Q[:], P[:] = Q3.reshape(Q.shape), P3.reshape(P.shape)
                return seconds
            cuda_call(q0[:4].copy(), p0[:4].copy())  # compile
            runners[peer] = cuda_call
        if "jax" in peers:
            jf = jax_runner(name, prm, dt, steps)
            shape = (size, dof // 3, 3) if name != "spherical_pendulum" else (size, 3)

            def jax_call(Q, P, jf=jf, shape=shape):
                q, p = jf(Q.reshape(shape), P.reshape(shape))
                q.block_until_ready()
                Q[:] = np.asarray(q).reshape(Q.shape)
                P[:] = np.asarray(p).reshape(P.shape)
            jax_call(q0.copy(), p0.copy())  # compile (same shapes as the timed calls)
            runners["jax"] = jax_call

        mine = "tether_" + args.backend
        rates = {k: [] for k in [mine, *runners]}
        finals = {}
        for r in range(args.repeats):
            summary, qt, pt, failed = run_tether(args.tether, config, size, dt, steps, args.threads, args.backend)
            rates[mine].append(summary["trajectory_steps_per_second"])
            finals[mine] = (qt, pt, failed)
            for peer, call in runners.items():
                Q, P = q0.copy(), p0.copy()
                t0 = time.perf_counter()
                kernel_seconds = call(Q, P)  # a float from the CUDA peers (0 in Numba's simulator: its timings are bogus)
                seconds = kernel_seconds if isinstance(kernel_seconds, float) and kernel_seconds > 0 \
                    else time.perf_counter() - t0
                rates[peer].append(size * steps / seconds)
                finals[peer] = (Q, P, None)
            print(f"{name} repeat {r + 1}: " + ", ".join(f"{k} {v[-1]:.3e}" for k, v in rates.items()),
                  file=sys.stderr)

        qt, pt, failed = finals[mine]
        record = {"case": name, "trajectories": size, "steps": steps, "dt": dt, "tether_failed": failed,
                  "trajectory_steps_per_second": {k: max(v) for k, v in rates.items()},
                  "each": rates, "max_abs_difference_from_tether": {}}
        for peer in runners:
            Q, P, _ = finals[peer]
            per_q = np.max(np.abs(Q - qt), axis=1)
            record["max_abs_difference_from_tether"][peer] = {
                "q": float(np.max(per_q)), "p": float(np.max(np.abs(P - pt))),
                "q_median_over_trajectories": float(np.median(per_q)),
                "q_99th_percentile_over_trajectories": float(np.percentile(per_q, 99))}
        on_gpu = args.backend == "cuda"  # tether cuda against the numba.cuda peers, tether cpu against Numba's
        best_peer = max((v for k, v in record["trajectory_steps_per_second"].items()
                         if k.startswith("numba") and k.startswith("numba_cuda") == on_gpu), default=None)
        if best_peer:
            record["tether_over_best_numba"] = record["trajectory_steps_per_second"][mine] / best_peer
        results.append(record)
        print(json.dumps(record), file=sys.stderr)

    arch = build_of(args.tether).get("TETHER_CPU_ARCH", "unknown (no CMakeCache.txt beside it: a bundle)")
    jax_on = None
    if "jax" in peers:  # where jit placed the JAX peer: the GPU wherever JAX has one
        import jax
        jax_on = str(jax.devices()[0])
    text = json.dumps({**provenance(), "tether": args.tether, "tether_cpu_arch": arch, "backend": args.backend,
                       "jax_device": jax_on,
                       "threads": args.threads, "repeats": args.repeats, "statistic": "best",
                       "numba": numba.__version__, "cases": results}, indent=2)
    print(text)
    if not args.quick:
        print("saved bench/results/" + save_result(text, "rattle-peers" + (f"-{args.label}" if args.label else "")), file=sys.stderr)


if __name__ == "__main__":
    main()
