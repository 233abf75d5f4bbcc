"""The JAX peers of bench/ on JAX's cpu (a GPU machine runs the same code on its GPU): bench/rattle_peers.py's
RATTLE ends where tether ends from tether's own starts, and bench/shoot_peers.py's shooter (diffrax Dopri8
under jacfwd, Newton, jit(vmap)) reaches the closed-form Heisenberg distances it is judged by, so that a
GPU run compares tools that compute the same thing at the same accuracy."""
import json
import sys

import numpy as np
import pytest

from conftest import SOURCE, tether_states

pytest.importorskip("jax")
sys.path.insert(0, str(SOURCE / "bench"))
import rattle_peers  # noqa: E402


def test_the_jax_pendulum_ends_where_tether_does():
    config = json.loads((SOURCE / "configs" / "spherical_pendulum.json").read_text())
    q0, p0, q1, p1 = tether_states(config, 16, 0.01, 20)
    q, p = rattle_peers.jax_runner("spherical_pendulum", config["system"]["parameters"], 0.01, 20)(q0, p0)
    np.testing.assert_allclose(np.asarray(q), q1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(p), p1, rtol=0, atol=1e-11)


def test_the_jax_chain_ends_where_tether_does():
    config = rattle_peers.chain_config(8)
    q0, p0, q1, p1 = tether_states(config, 4, 0.002, 10)
    run = rattle_peers.jax_runner("chain8", config["system"]["parameters"], 0.002, 10)
    q, p = run(q0.reshape(4, 8, 3), p0.reshape(4, 8, 3))
    np.testing.assert_allclose(np.asarray(q).reshape(4, 24), q1, rtol=0, atol=1e-11)
    np.testing.assert_allclose(np.asarray(p).reshape(4, 24), p1, rtol=0, atol=1e-9)


def test_the_jax_shooter_reaches_the_closed_form_distances():
    import shoot_peers

    # Four targets of the benchmark's grid, off the cut locus, with its guesses and continuation.
    targets = np.array([[0.5, 0.0, 0.1], [-0.9, 0.0, 0.3], [1.2, 0.0, -0.4], [0.2, 0.0, 0.05]])
    reference = [shoot_peers.heisenberg_distance(q) for q in targets]
    r = shoot_peers.run_jax(targets, reference, steps=19, iterations=40, processes=1, platform="cpu")
    assert r["solved"] == len(targets) and r["not_shortest"] == 0
    assert r["max_rel_length_error"] <= 1e-10
