"""The property suite on three systems only a declaration covers: the rigid water molecule
(configs/water.json), the closed five-bar linkage (configs/five_bar.json), both with RATTLE on
T*N, and the SE(2) sub-Riemannian structure (configs/se2.json) with Gauss-Legendre on T*R^3.
Each keeps the symplectic form, runs back to its start with p flipped, and gives the same bits
for every thread count and batch size."""
import json

import numpy as np
import pytest

import tether
from conftest import SOURCE


def declared(name, method):
    """configs/NAME.json's system with `method` on the cpu backend, final states only."""
    system = json.loads((SOURCE / "configs" / f"{name}.json").read_text())["system"]
    return {"system": system, "method": method, "backend": "cpu",
            "output": {"every": 10**6, "final_states": True}}


HOLONOMIC = {
    "water": ({"name": "rattle", "dt": 0.002, "newton": {"tolerance": 1e-14}},
              [0, 0, 0, 0.9572, 0, 0, -0.23999, 0.92663, 0], 15.0),
    "five_bar": ({"name": "rattle", "dt": 0.002, "newton": {"tolerance": 1e-14}},
                 [0, -1, 1, -1.5, 2, -1], 1.0),
}
SE2 = ({"name": "gauss_legendre", "stages": 2, "dt": 0.02, "newton": {"tolerance": 1e-14}},
       [0.1, -0.2, 0.3], 1.0)


def run_from(config, q, p, steps, project, **options):
    """Final (q, p) of `steps` steps from each row of (q, p)."""
    c = {**config, "method": {**config["method"], "steps": steps}}
    initial = {"states": {"q": q, "p": p}}
    if project:
        initial["project"] = True
    c["ensemble"] = {"initial": initial}
    ds = tether.run(c, progress=False, **options)
    assert (ds.status == 0).all()
    return ds.q.values, ds.p.values


def base_state(name):
    """A state of the system: its start's q, a random p, (projected onto T*N for the holonomic)."""
    rng = np.random.default_rng(5)
    if name == "se2":
        method, q, scale = SE2
        return declared("se2", method), np.array([q]), scale * rng.standard_normal((1, 3)), False
    method, q, scale = HOLONOMIC[name]
    config = declared(name, method)
    q = np.array([q], dtype=float)
    q, p = run_from(config, q, scale * rng.standard_normal(q.shape), 0, True)
    return config, q, p, True


def omega(a, b, n):
    """The canonical symplectic form dq ^ dp on two tangent vectors (q, p)."""
    return a[:n] @ b[n:] - a[n:] @ b[:n]


@pytest.mark.parametrize("name", ["water", "five_bar", "se2"])
def test_the_symplectic_form_is_kept(name):
    """omega(D phi d1, D phi d2) = omega(d1, d2) for the step map phi^200, the tangent vectors by central
    differences of runs from states moved by +-eps along random directions (and projected back
    onto T*N: tangent to it), to 1e-8 of their sizes (measured: 1e-10). A map that scales p by
    1 + 1e-6 after the steps fails the same check."""
    config, q, p, project = base_state(name)
    n = q.shape[1]
    rng = np.random.default_rng(11)
    eps, steps = 1e-6, 200
    directions = rng.standard_normal((3, 2 * n))
    starts = []
    for d in directions:
        for sign in (1, -1):
            starts.append(np.concatenate([q[0], p[0]]) + sign * eps * d)
    starts = np.array(starts)
    q0, p0 = run_from(config, starts[:, :n], starts[:, n:], 0, project)  # on T*N: the tangent vectors' ends
    q1, p1 = run_from(config, q0, p0, steps, False)
    before = np.hstack([q0, p0])
    after = np.hstack([q1, p1])
    scaled = np.hstack([q1, (1 + 1e-6) * p1])
    tangent = lambda x, k: (x[2 * k] - x[2 * k + 1]) / (2 * eps)  # noqa: E731
    for i, j in ((0, 1), (0, 2), (1, 2)):
        w0 = omega(tangent(before, i), tangent(before, j), n)
        size = np.linalg.norm(tangent(after, i)) * np.linalg.norm(tangent(after, j))
        assert abs(omega(tangent(after, i), tangent(after, j), n) - w0) < 1e-8 * size, (i, j)
        assert abs(omega(tangent(scaled, i), tangent(scaled, j), n) - w0) > 1e-7 * abs(w0), "the check is blind"


@pytest.mark.parametrize("name", ["water", "se2"])
def test_flipping_p_runs_back_to_the_start(name):
    config, q, p, _ = base_state(name)
    q1, p1 = run_from(config, q, p, 300, False)
    q2, p2 = run_from(config, q1, -p1, 300, False)
    np.testing.assert_allclose(q2, q, atol=1e-10)
    np.testing.assert_allclose(-p2, p, atol=1e-9 * (1 + np.abs(p).max()))


@pytest.mark.parametrize("name", ["water", "five_bar"])
def test_threads_and_batches_change_no_bit(name):
    method, q, scale = HOLONOMIC[name]
    config = declared(name, {**method, "steps": 100})
    config["ensemble"] = {"size": 200, "seed": 9, "initial": {
        "sampler": "around", "q": q, "p": [0.0] * len(q), "position_spread": 0.02, "momentum_spread": scale}}
    one = tether.run(config, threads=1, batch_size=64, progress=False)
    two = tether.run(config, threads=2, progress=False)
    for v in ("q", "p", "status", "energy_error"):
        np.testing.assert_array_equal(one[v], two[v])
